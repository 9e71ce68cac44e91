// `glidepath canary start|status|pause|resume|promote|abort|history`: the progressive canary.
import type { Command } from 'commander';
import { TERMINAL_ROLLOUT_PHASES } from '../../store/types.js';
import { DEFAULTS } from '../../defaults.js';
import { durationFlag, err, fmtMs, fmtTime, fmtWeights, fractionFlag, msFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { UsageError, printJson, table } from '../output.js';
import type { CanaryHistoryEntry, CanaryStartView, CanaryView } from '../../api/types.js';
import { formatCanaryEstimate } from './estimate.js';

const pct = (x: number | null | undefined) => (typeof x === 'number' && Number.isFinite(x) ? `${(x * 100).toFixed(2)}%` : '-');

/** The live view as text: stage, weights, both versions' numbers, the last verdict, the next decision. */
export function renderCanary(v: CanaryView): string {
  const lines: string[] = [];
  lines.push(`${v.id}  ${v.model}: ${v.canary} vs stable ${v.stable}  phase ${v.phase.toUpperCase()}`);
  lines.push(
    `stage ${Math.min(v.stage_index + 1, v.stages.length)}/${v.stages.length} (${v.stages.map((s, i) => (i === v.stage_index ? `[${s}%]` : `${s}%`)).join(' ')})  weights ${fmtWeights(v.weights)}`,
  );
  if (v.message) lines.push(v.message);
  lines.push('');
  const rows = [v.stable, v.canary].map((id) => {
    const w = v.windows[id];
    return [
      id === v.canary ? `${id} (canary)` : `${id} (stable)`,
      w?.requests ?? 0,
      pct(w?.error_rate),
      fmtMs(w?.ttft_ms.p99),
      fmtMs(w?.tpot_ms.p99),
      fmtMs(w?.latency_ms.p50),
      fmtMs(w?.latency_ms.p99),
    ];
  });
  lines.push(table(['VERSION', 'REQUESTS', 'ERRORS', 'TTFT_P99', 'TPOT_P99', 'P50', 'P99'], rows).trimEnd());
  const last = v.last;
  if (last) {
    lines.push('', `last verdict: ${last.outcome.toUpperCase()} (score ${last.score !== null ? last.score.toFixed(0) : '-'}) → ${last.action}`);
    for (const m of last.metrics) lines.push(`  ${m.name.padEnd(10)} ${m.outcome.padEnd(12)} ${m.reason}`);
  }
  const decisive = v.verdicts.filter((x) => x.decisive);
  if (decisive.length > 0) {
    lines.push(
      '',
      table(
        ['STAGE', 'PERCENT', 'VERDICT', 'ACTION', 'SCORE'],
        decisive.map((d) => [d.stage + 1, `${d.percent}%`, d.outcome, d.action, d.score !== null ? d.score.toFixed(0) : '-']),
      ).trimEnd(),
    );
  }
  if (v.next_decision) {
    const n = v.next_decision;
    const eta = n.earliest_ms === null ? `unknown (no canary traffic yet; ${n.samples_needed} sample(s) needed)` : `in ~${fmtMs(n.earliest_ms)}`;
    lines.push(
      '',
      `next decision: ${eta}${v.samples ? ` (samples: canary ${v.samples.canary}, stable ${v.samples.stable}, min ${v.samples.min_samples})` : ''}`,
    );
  }
  if (v.rollback) {
    const t = v.rollback.timing;
    lines.push('', `rolled back at ${v.rollback.percent_at_rollback}% after ${v.rollback.canary_requests} canary request(s): ${v.rollback.reason}`);
    lines.push(`  traffic shift ${fmtMs(t.traffic_shift_ms)}, drain ${fmtMs(t.drain_ms)}, unload ${fmtMs(t.unload_ms)}, total ${fmtMs(t.total_ms)}`);
  }
  return lines.join('\n') + '\n';
}

export function parseStages(v: string | undefined): number[] | undefined {
  if (v === undefined) return undefined;
  const parts = v.split(',').map((x) => x.trim());
  const nums = parts.map(Number);
  if (parts.some((p) => p === '') || nums.some((n) => !Number.isFinite(n)))
    throw new UsageError(`--stages must be comma-separated percentages such as 2,5,10,25,50,100, got ${JSON.stringify(v)}`);
  if (nums.length > DEFAULTS.rollout.maxStages) throw new UsageError(`--stages: at most ${DEFAULTS.rollout.maxStages} stages, got ${nums.length}`);
  return nums;
}

export function register(program: Command): void {
  const canary = program
    .command('canary')
    .description('progressive canary: a small share of traffic to a new version, judged stage by stage, rolled back automatically when worse');

  withCommon(
    canary
      .command('start')
      .description('load the version beside the stable one (if needed) and walk the stages')
      .requiredOption('--version <id>', 'the candidate version')
      .option('--stages <list>', 'percentages, e.g. 2,5,10,25,50,100 (default from the config)')
      .option('--stage-duration <time>', 'least time per stage, e.g. 5m (default from the config)')
      .option('--shadow-share <x>', 'mirror this share of stable traffic to the canary for pairwise judging (0–1)'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { version: string; stages?: string; stageDuration?: string; shadowShare?: string }) => {
    const s = session(o);
    const version = textFlag('--version', o.version) as string;
    const stages = parseStages(o.stages);
    const stageDurationMs = durationFlag('--stage-duration', o.stageDuration);
    const shadow = fractionFlag('--shadow-share', o.shadowShare);
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<CanaryStartView>(modelPath(model, '/canary'), {
      version,
      ...(stages ? { stages } : {}),
      ...(stageDurationMs !== undefined ? { stage_duration_ms: stageDurationMs } : {}),
      ...(shadow !== undefined ? { shadow_share: shadow } : {}),
    });
    const estimate = formatCanaryEstimate(v.stage_plan);
    if (estimate.warning) err(estimate.warning);
    if (s.json) return printJson(v);
    out(`Started ${v.id}: ${v.canary} vs ${v.stable}, stages ${v.stages.join(',')}%; follow it with \`glidepath canary status --model ${model} --watch\``);
    for (const l of estimate.lines) out(l);
  });

  withCommon(
    canary
      .command('status')
      .description('the running (or last) canary: stage, weights, per-version metrics, verdicts, time to next decision')
      .option('--id <rollout>', 'a past rollout instead of the current one')
      .option('-w, --watch', 'refresh until the canary ends')
      .option('--interval <ms>', 'refresh interval with --watch (default 1000)'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { id?: string; watch?: boolean; interval?: string }) => {
    const s = session(o);
    const interval = msFlag('--interval', o.interval) ?? 1000;
    const model = await resolveModel(s, o.model);
    const q = o.id ? { id: o.id } : {};
    for (;;) {
      const v = await s.client.get<CanaryView>(modelPath(model, '/canary'), q);
      if (o.watch && !s.json && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
      if (s.json) printJson(v);
      else out(renderCanary(v));
      if (!o.watch || TERMINAL_ROLLOUT_PHASES.includes(v.phase)) {
        if (v.phase === 'rolled_back' || v.phase === 'failed') process.exitCode = 1;
        return;
      }
      await new Promise((r) => setTimeout(r, interval));
    }
  });

  for (const verb of ['pause', 'resume', 'promote', 'abort'] as const) {
    withCommon(
      canary
        .command(verb)
        .description(
          {
            pause: 'hold the canary at its stage (analysis keeps running; a failure still rolls back)',
            resume: 'continue a paused canary (its stage counts as passed)',
            promote: 'promote the canary to 100 % now',
            abort: 'roll the canary back now',
          }[verb],
        )
        .option('--reason <text>', 'why (audit log)'),
      { model: 'one' },
    ).action(async (o: CommonOptions & { reason?: string }) => {
      const s = session(o);
      const reason = textFlag('--reason', o.reason);
      const model = await resolveModel(s, o.model);
      const v = await s.client.post<CanaryView>(modelPath(model, `/canary/${verb}`), reason ? { reason } : {}, { long: true });
      if (s.json) return printJson(v);
      out(`${v.id}: ${v.phase}${v.message ? ` — ${v.message}` : ''}`);
    });
  }

  withCommon(canary.command('history').description('past rollouts of the model, newest first'), { model: 'one' }).action(async (o: CommonOptions) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const rows = await s.client.get<CanaryHistoryEntry[]>(modelPath(model, '/canary/history'));
    if (s.json) return printJson(rows);
    out(
      table(
        ['ROLLOUT', 'PHASE', 'CANARY', 'STABLE', 'STARTED', 'MESSAGE'],
        rows.map((r) => [r.id, r.phase, r.state.canary, r.state.stable, fmtTime(r.created_at), r.state.message ?? '']),
      ),
    );
  });
}
