// `glidepath probes show|record|pin --version V`: a version's health probe set — what its workers
// are checked against (docs/health.md).
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { enc, fmtTime, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { UsageError, printJson, table } from '../output.js';
import type { ProbeSetView } from '../../api/types.js';

type Opts = CommonOptions & { version: string };

function show(p: ProbeSetView | null, what: string): void {
  if (p === null) return out(`${what}: no probe set recorded yet (it is recorded when the version is loaded, or with \`glidepath probes record\`)`);
  out(
    `${what}: ${p.probes.length} prompt(s), ${p.basis}${p.pinned ? ', pinned' : ''}, recorded ${fmtTime(p.recorded_at)}${p.from.length ? ` from ${p.from.join(', ')}` : ''}`,
  );
  out(
    table(
      ['PROMPT', 'MAX_TOKENS', 'EXPECTED', 'LOGPROB_RANGE'],
      p.probes.map((x) => [
        x.prompt,
        x.max_tokens,
        JSON.stringify(x.tokens.join('')),
        x.logprobs ? `${Math.min(...x.logprobs.map((r) => r.min)).toFixed(2)}..${Math.max(...x.logprobs.map((r) => r.max)).toFixed(2)}` : '-',
      ]),
    ).trimEnd(),
  );
  for (const s of p.skipped) out(`skipped ${JSON.stringify(s.prompt)}: ${s.why}`);
}

export function register(program: Command): void {
  const probes = program
    .command('probes')
    .description("a version's health probe set: the prompts its workers are probed with and what a healthy worker answers");
  const version = (c: Command) => withCommon(c.requiredOption('--version <version>', 'the version'), { model: 'one' });

  version(probes.command('show').description('show the probe set')).action(async (o: Opts) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const id = textFlag('--version', o.version) as string;
    const p = await s.client.get<ProbeSetView | null>(modelPath(model, `/versions/${enc(id)}/probes`));
    if (s.json) return printJson(p);
    show(p, `${model}/${id}`);
  });

  version(probes.command('record').description('record the probe set again from the serving workers (majority, or the configured reference)')).action(
    async (o: Opts) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const id = textFlag('--version', o.version) as string;
      const p = await s.client.post<ProbeSetView>(modelPath(model, `/versions/${enc(id)}/probes/record`), {}, { long: true });
      if (s.json) return printJson(p);
      show(p, `${model}/${id} recorded`);
    },
  );

  version(
    probes
      .command('pin')
      .description('pin a probe set from a JSON file ({"probes":[{"prompt","max_tokens","tokens":[…],"logprobs":[{"min","max"}…]|null}]})')
      .requiredOption('--file <path>', 'the probe set, JSON'),
  ).action(async (o: Opts & { file: string }) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const id = textFlag('--version', o.version) as string;
    let body: unknown;
    try {
      body = JSON.parse(readFileSync(o.file, 'utf8'));
    } catch (e) {
      throw new UsageError(`--file ${o.file}: ${(e as Error).message}`);
    }
    const p = await s.client.put<ProbeSetView>(modelPath(model, `/versions/${enc(id)}/probes`), body);
    if (s.json) return printJson(p);
    show(p, `${model}/${id} pinned`);
  });
}
