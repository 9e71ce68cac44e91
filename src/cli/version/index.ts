// `glidepath version list|show|register|retire`: the registry of a model's versions.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parse as parseYaml } from 'yaml';
import { isLoaded } from '../../domain/version.js';
import { enc, fmtGpus, fmtMs, fmtPct, fmtTime, intFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table, UsageError } from '../output.js';
import type { RetireView, VersionDetail, VersionView } from '../../api/types.js';

/** Seed 000's columns first, then what an operator looks for next. */
export function versionsTable(vs: readonly VersionView[]): string {
  return table(
    ['VERSION', 'STATUS', 'LOADED_AT', 'GPU_ASSIGNMENT', 'WEIGHT', 'LOAD_TIME', 'ROLLBACK'],
    vs.map((v) => [
      v.version,
      `${v.status}${v.asleep ? ' (asleep)' : ''}`,
      fmtTime(v.loaded_at),
      fmtGpus(v.gpus),
      v.weight === null ? '-' : fmtPct(v.weight),
      fmtMs(v.load_time_ms),
      v.rollback_eligible ? 'eligible' : '-',
    ]),
  );
}

function kvLine(v: VersionDetail): string {
  const k = v.kv_cache_compatibility;
  if (!k) return v.status === 'active' ? '- (this is the active version)' : '- (no active version to compare with)';
  return k.compatible ? `compatible with ${k.with} (active)` : `INCOMPATIBLE with ${k.with} (active): ${k.mismatches.join('; ')}`;
}

function showVersion(v: VersionDetail): void {
  const a = v.architecture;
  const rows: [string, string][] = [
    ['status', `${v.status}${v.asleep ? ' (asleep: weights in CPU memory)' : ''}`],
    ['weight', v.weight === null ? '- (not in the route)' : fmtPct(v.weight)],
    ['loaded at', fmtTime(v.loaded_at)],
    ['load time', fmtMs(v.load_time_ms)],
    ['GPU assignment', fmtGpus(v.gpus)],
    ['tp / replicas', `${v.tp} / ${v.replicas}`],
    ['provider', v.provider],
    ['weights', `${v.weights}${v.weight_hash ? ` (${v.weight_hash})` : ''}`],
    ['base model', v.base_model],
    ['quantization', v.quantization],
    [
      'architecture',
      `${a.family ? `${a.family}, ` : ''}${a.layers} layers, ${a.kv_heads} KV heads, head dim ${a.head_dim}, block size ${a.block_size}, max context ${a.max_context}, tokenizer ${a.tokenizer}`,
    ],
    ['card checksum', v.card_checksum],
    ['GPU memory', `${v.gpu_memory_gb} GB`],
    ['warm-up tokens', String(v.warmup_tokens)],
    ['health', `${v.health.state}${v.health.detail ? ` (${v.health.detail})` : ''}`],
    ['rollback', v.rollback_eligible ? 'eligible' : `not eligible${v.rollback_blocked_reason ? ` (${v.rollback_blocked_reason})` : ''}`],
    ['KV-cache', kvLine(v)],
    ['registered at', fmtTime(v.registered_at)],
  ];
  const p = v.probes;
  rows.push(['probes', p ? `${p.probes.length} prompt(s), ${p.basis}${p.pinned ? ', pinned' : ''}, recorded ${fmtTime(p.recorded_at)}` : 'none recorded yet']);
  if (v.failure) rows.push(['failure', `${v.failure.message}${v.failure.code ? ` (${v.failure.code})` : ''}`]);
  if (Object.keys(v.metadata).length > 0) rows.push(['metadata', JSON.stringify(v.metadata)]);
  const w = Math.max(...rows.map(([k]) => k.length));
  out(`${v.model}/${v.version}`);
  for (const [k, val] of rows) out(`  ${k.padEnd(w)}  ${val}`);
  if (v.transitions.length > 0) {
    out('');
    out(
      table(
        ['AT', 'FROM', 'TO', 'ACTOR', 'REASON'],
        v.transitions.map((t) => [fmtTime(t.at), t.from, t.to, t.actor, t.reason]),
      ),
    );
  }
}

interface RegisterOptions extends CommonOptions {
  file?: string;
  id?: string;
  weights?: string;
  weightHash?: string;
  baseModel?: string;
  quantization?: string;
  tp?: string;
  replicas?: string;
}

/** The version to register, in glidepath.yaml's snake_case form: the file, then the flags over it. */
function registerBody(o: RegisterOptions): Record<string, unknown> {
  let body: Record<string, unknown> = {};
  if (o.file !== undefined) {
    let text: string;
    try {
      text = readFileSync(o.file === '-' ? 0 : o.file, 'utf8');
    } catch (err) {
      throw new UsageError(`--file: cannot read ${o.file}: ${(err as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(text);
    } catch (err) {
      throw new UsageError(`--file: ${o.file} is not valid YAML or JSON: ${(err as Error).message.split('\n')[0] ?? ''}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new UsageError(`--file: ${o.file} must hold one version as a mapping (id, weights, provider, …), as under models[].versions in glidepath.yaml`);
    }
    body = parsed as Record<string, unknown>;
  }
  const set = (k: string, v: unknown) => {
    if (v !== undefined) body[k] = v;
  };
  set('id', textFlag('--id', o.id));
  set('weights', textFlag('--weights', o.weights));
  set('weight_hash', textFlag('--weight-hash', o.weightHash));
  set('base_model', textFlag('--base-model', o.baseModel));
  set('quantization', textFlag('--quantization', o.quantization));
  set('tp', intFlag('--tp', o.tp));
  set('replicas', intFlag('--replicas', o.replicas));
  if (body.id === undefined) throw new UsageError('version register needs a version id: pass --id V or give `id:` in --file');
  return body;
}

export function register(program: Command): void {
  const version = program.command('version').description("a model's versions: list, show, register, retire");

  withCommon(version.command('list').description('the versions of a model (VERSION STATUS LOADED_AT GPU_ASSIGNMENT …)'), { model: 'one' }).action(
    async (o: CommonOptions) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const vs = await s.client.get<VersionView[]>(modelPath(model, '/versions'));
      if (s.json) return printJson(vs);
      out(versionsTable(vs));
    },
  );

  withCommon(
    version
      .command('show')
      .argument('<version>', 'version id')
      .description('one version: metadata, architecture, KV-cache compatibility with the active version, history'),
    {
      model: 'one',
    },
  ).action(async (id: string, o: CommonOptions) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const v = await s.client.get<VersionDetail>(modelPath(model, `/versions/${enc(id)}`));
    if (s.json) return printJson(v);
    showVersion(v);
  });

  withCommon(
    version
      .command('register')
      .description('register a new version (status registered; `deploy green` loads it)')
      .option('-f, --file <file>', 'the version as YAML or JSON, in the form of models[].versions[] in glidepath.yaml (- for stdin)')
      .option('--id <version>', 'version id (overrides the file)')
      .option('--weights <path>', 'weights path or URL')
      .option('--weight-hash <hash>', 'expected weight hash, e.g. sha256:…')
      .option('--base-model <name>', 'base model')
      .option('--quantization <q>', 'quantization, e.g. fp16, fp8, awq')
      .option('--tp <n>', 'tensor-parallel size')
      .option('--replicas <n>', 'workers to run'),
    { model: 'one' },
  ).action(async (o: RegisterOptions) => {
    const s = session(o);
    const body = registerBody(o);
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<VersionView>(modelPath(model, '/versions'), body);
    if (s.json) return printJson(v);
    out(`Registered ${v.model}/${v.version} (card ${v.card_checksum}); load it with \`glidepath deploy green --version ${v.version}\``);
  });

  withCommon(
    version
      .command('retire')
      .argument('<version>', 'version id')
      .description('unload a version and free its GPUs (never the active one; the standby only with --force)')
      .option('--force', 'retire even the standby (the instant-rollback target)'),
    { model: 'one' },
  ).action(async (id: string, o: CommonOptions & { force?: boolean }) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const before = await s.client.get<VersionView>(modelPath(model, `/versions/${enc(id)}`));
    const r = await s.client.post<RetireView>(modelPath(model, `/versions/${enc(id)}/retire`), { force: o.force ?? false });
    if (s.json) return printJson(r);
    const loaded = isLoaded(before);
    const drained =
      r.drain && (r.drain.drained > 0 || r.drain.aborted > 0)
        ? `; drained ${r.drain.drained} in-flight request(s)${r.drain.aborted ? `, aborted ${r.drain.aborted}` : ''}`
        : '';
    out(
      `Retired ${r.version}, freed ${r.freed_gpus} GPU${r.freed_gpus === 1 ? '' : 's'}${loaded ? ` (${fmtGpus(before.gpus)})` : ' (was not loaded)'}${drained}`,
    );
  });
}
