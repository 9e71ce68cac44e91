// `glidepath adapter canary start|status|pause|resume|promote|abort|history`: a new version of a LoRA
// adapter on a share of that adapter's requests, judged against the registered one (docs/multi-model.md).
import type { Command } from 'commander';
import type { AdapterCanaryStateView, AdapterCanaryView } from '../../api/types.js';
import { TERMINAL_ROLLOUT_PHASES } from '../../store/types.js';
import { parseStages } from '../canary/index.js';
import { durationFlag, fmtMs, fmtTime, msFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';

const side = (s: { version: string | null; source: string }) => s.version ?? s.source;

/** The view as text: both sides, the stage and share, samples, the last verdict, the decisive ones, a rollback. */
export function renderAdapterCanary(v: AdapterCanaryView): string {
  const l: string[] = [];
  l.push(`${v.id}  ${v.model}/${v.adapter}: ${side(v.candidate)} vs ${side(v.stable)}  phase ${v.phase.toUpperCase()}`);
  l.push(
    `stage ${Math.min(v.stage_index + 1, v.stages.length)}/${v.stages.length} (${v.stages.map((s, i) => (i === v.stage_index ? `[${s}%]` : `${s}%`)).join(' ')})  ${v.percent}% of ${v.adapter}'s requests to ${v.candidate.served_as}`,
  );
  if (v.message) l.push(v.message);
  if (v.samples) l.push(`samples: stable ${v.samples.stable}, candidate ${v.samples.canary} (min ${v.samples.min_samples})`);
  if (v.last) {
    l.push('', `last verdict: ${v.last.outcome.toUpperCase()} (score ${v.last.score !== null ? v.last.score.toFixed(0) : '-'}) → ${v.last.action}`);
    for (const m of v.last.metrics) l.push(`  ${m.name.padEnd(10)} ${m.outcome.padEnd(12)} ${m.reason}`);
  }
  const decisive = v.verdicts.filter((x) => x.decisive);
  if (decisive.length > 0)
    l.push(
      '',
      table(
        ['STAGE', 'PERCENT', 'VERDICT', 'ACTION', 'SCORE'],
        decisive.map((d) => [d.stage + 1, `${d.percent}%`, d.outcome, d.action, d.score !== null ? d.score.toFixed(0) : '-']),
      ).trimEnd(),
    );
  const r = v.rollback;
  if (r) {
    l.push('', `rolled back at ${r.percent_at_rollback}% after ${r.candidate_requests} request(s) of the candidate: ${r.reason}`);
    l.push(
      `  traffic shift ${fmtMs(r.timing.traffic_shift_ms)}, unload ${fmtMs(r.timing.unload_ms)} (${r.unloaded} worker(s)), total ${fmtMs(r.timing.total_ms)}`,
    );
    for (const f of r.unload_failed) l.push(`  unload failed: ${f}`);
  }
  return l.join('\n') + '\n';
}

export function registerCanary(adapter: Command): void {
  const cmd = adapter.command('canary').description('a new version of an adapter on a share of its requests, judged stage by stage, rolled back when worse');
  const path = (model: string, name: string, rest = '') => modelPath(model, `/adapters/${encodeURIComponent(name)}/canary${rest}`);

  withCommon(
    cmd
      .command('start <name> <source>')
      .description('load SOURCE beside the registered adapter NAME (as NAME--VERSION) and walk the stages')
      .requiredOption('--adapter-version <v>', 'the new version')
      .option('--stages <list>', 'percentages of the adapter’s requests, e.g. 5,25,50,100 (default: the model’s canary stages)')
      .option('--stage-duration <time>', 'least time per stage, e.g. 2m (default: the model’s)'),
    { model: 'one' },
  ).action(async (name: string, source: string, o: CommonOptions & { adapterVersion: string; stages?: string; stageDuration?: string }) => {
    const s = session(o);
    const version = textFlag('--adapter-version', o.adapterVersion) as string;
    const stages = parseStages(o.stages);
    const stageDurationMs = durationFlag('--stage-duration', o.stageDuration);
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<AdapterCanaryView>(path(model, name), {
      source,
      version,
      ...(stages ? { stages } : {}),
      ...(stageDurationMs !== undefined ? { stage_duration_ms: stageDurationMs } : {}),
    });
    if (s.json) return printJson(v);
    out(
      `Started ${v.id}: ${name} ${version} vs ${side(v.stable)}, stages ${v.stages.join(',')}% of its requests; follow it with \`glidepath adapter canary status ${name} --model ${model} --watch\``,
    );
  });

  withCommon(
    cmd
      .command('status <name>')
      .description("the adapter's running (or last) canary")
      .option('--id <rollout>', 'a past rollout instead of the current one')
      .option('-w, --watch', 'refresh until the canary ends')
      .option('--interval <ms>', 'refresh interval with --watch (default 1000)'),
    { model: 'one' },
  ).action(async (name: string, o: CommonOptions & { id?: string; watch?: boolean; interval?: string }) => {
    const s = session(o);
    const interval = msFlag('--interval', o.interval) ?? 1000;
    const model = await resolveModel(s, o.model);
    for (;;) {
      const v = await s.client.get<AdapterCanaryView>(path(model, name), o.id ? { id: o.id } : {});
      if (o.watch && !s.json && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
      if (s.json) printJson(v);
      else out(renderAdapterCanary(v));
      if (!o.watch || TERMINAL_ROLLOUT_PHASES.includes(v.phase)) {
        if (v.phase === 'rolled_back' || v.phase === 'failed') process.exitCode = 1;
        return;
      }
      await new Promise((r) => setTimeout(r, interval));
    }
  });

  const verbs = {
    pause: 'hold the canary at its stage (a failing verdict still rolls back)',
    resume: 'continue a paused canary (its stage counts as passed)',
    promote: 'make the candidate the adapter now (the old version is unloaded)',
    abort: 'send every request back to the registered version now and unload the candidate',
  } as const;
  for (const verb of Object.keys(verbs) as (keyof typeof verbs)[]) {
    withCommon(cmd.command(`${verb} <name>`).description(verbs[verb]).option('--reason <text>', 'why (audit log)'), { model: 'one' }).action(
      async (name: string, o: CommonOptions & { reason?: string }) => {
        const s = session(o);
        const reason = textFlag('--reason', o.reason);
        const model = await resolveModel(s, o.model);
        const v = await s.client.post<AdapterCanaryView>(path(model, name, `/${verb}`), reason ? { reason } : {}, { long: true });
        if (s.json) return printJson(v);
        out(`${v.id}: ${v.phase}${v.message ? ` — ${v.message}` : ''}`);
      },
    );
  }

  withCommon(cmd.command('history <name>').description("the adapter's past canaries, newest first"), { model: 'one' }).action(
    async (name: string, o: CommonOptions) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const rows = await s.client.get<AdapterCanaryStateView[]>(path(model, name, '/history'));
      if (s.json) return printJson(rows);
      out(
        table(
          ['ROLLOUT', 'PHASE', 'CANDIDATE', 'STABLE', 'STARTED', 'MESSAGE'],
          rows.map((r) => [r.id, r.phase, side(r.candidate), side(r.stable), fmtTime(r.created_at), r.message ?? '']),
        ),
      );
    },
  );
}
