// `glidepath rollout rolling|status|pause|resume|abort|undo`: the rolling update (docs/rolling.md),
// with a live progress bar per role.
import type { Command } from 'commander';
import { durationFlag, fmtMs, fmtWeights, intFlag, msFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions, Session } from '../common.js';
import { UsageError, printJson } from '../output.js';
import type { RollingView } from '../../api/types.js';

const TERMINAL = ['succeeded', 'aborted', 'rolled_back', 'failed'];
const BAR = 24;

/** `1`, `25%` → the API's budget (a number or a percentage string); anything else a usage error. */
function budgetFlag(flag: string, v: string | undefined): number | string | undefined {
  if (v === undefined) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  if (/^\d+(\.\d+)?%$/.test(v) && Number(v.slice(0, -1)) <= 100) return v;
  throw new UsageError(`${flag}: expected a count of workers (0, 1, 2…) or a percentage such as 25%, got ${JSON.stringify(v)}`);
}

function partitionFlag(v: string | undefined): number | undefined {
  return intFlag('--partition', v, 0);
}

interface SettingsFlags {
  maxSurge?: string;
  maxUnavailable?: string;
  stepTimeout?: string;
  progressDeadline?: string;
  onFailure?: string;
}

function settingsBody(o: SettingsFlags): Record<string, unknown> {
  const onFailure = o.onFailure;
  if (onFailure !== undefined && onFailure !== 'pause' && onFailure !== 'rollback')
    throw new UsageError(`--on-failure: expected pause or rollback, got ${JSON.stringify(onFailure)}`);
  const body: Record<string, unknown> = {
    max_surge: budgetFlag('--max-surge', o.maxSurge),
    max_unavailable: budgetFlag('--max-unavailable', o.maxUnavailable),
    step_timeout_ms: durationFlag('--step-timeout', o.stepTimeout),
    progress_deadline_ms: durationFlag('--progress-deadline', o.progressDeadline),
    on_failure: onFailure,
  };
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
}

function withSettings(cmd: Command): Command {
  return cmd
    .option('--max-surge <n|pct>', 'workers beyond the desired count during the update, e.g. 1 or 25% (rounds up; default 1)')
    .option('--max-unavailable <n|pct>', 'workers below the desired count that may be serving nothing, e.g. 0 or 10% (rounds down; default 0)')
    .option('--step-timeout <time>', 'a new worker not ready within this fails the update, e.g. 10m')
    .option('--progress-deadline <time>', 'no progress for this long fails the update, e.g. 15m')
    .option('--on-failure <action>', 'pause (default) or rollback');
}

/** The progress of one role as a bar: new ready of desired, then the old workers still serving. */
function bar(ready: number, old: number, desired: number): string {
  const n = Math.round((Math.min(ready, desired) / desired) * BAR);
  const o = Math.min(BAR - n, Math.round((old / desired) * BAR));
  return `[${'#'.repeat(n)}${'o'.repeat(o)}${'.'.repeat(BAR - n - o)}]`;
}

export function renderRolling(v: RollingView): string {
  const lines = [
    `${v.id} ${v.model}: ${v.in_place ? `${v.to} restarted in place` : `${v.from} → ${v.to}`}  ${v.phase}${v.direction === 'back' && v.phase !== 'aborted' && v.phase !== 'rolled_back' ? ' (going back)' : ''}  step ${v.step}  elapsed ${fmtMs(v.elapsed_ms)}${v.eta_ms !== null ? `  ETA ${fmtMs(v.eta_ms)}` : ''}`,
    `  max surge ${v.max_surge}, max unavailable ${v.max_unavailable}${v.partition > 0 ? `, partition ${v.partition}` : ''}, on failure ${v.on_failure}`,
  ];
  for (const [role, r] of Object.entries(v.roles)) {
    lines.push(
      `  ${role.padEnd(10)} ${bar(r.ready, r.old, r.desired)}  new ready ${r.ready}/${r.desired}  starting ${r.starting}  old ${r.old}  surge ${r.surge_used}/${r.max_surge}  unavailable ${r.unavailable_used}/${r.max_unavailable}`,
    );
  }
  lines.push(`  weights: ${fmtWeights(v.weights)}${v.stopping > 0 ? `  (${v.stopping} old worker(s) draining)` : ''}`);
  if (v.paused_reason) lines.push(`  paused: ${v.paused_reason}`);
  if (v.rollback_reason) lines.push(`  going back because: ${v.rollback_reason}`);
  if (v.message) lines.push(`  ${v.message}`);
  for (const f of v.failures.slice(-3)) lines.push(`  failure: ${f.reason}`);
  return lines.join('\n') + '\n';
}

/** Print the update once, or until it ends or pauses with --watch (exit 1 when it went back or a failure paused it). */
async function follow(s: Session, model: string, id: string | undefined, watch: boolean, intervalMs: number): Promise<void> {
  for (;;) {
    const v = await s.client.get<RollingView>(modelPath(model, '/rolling'), id ? { id } : {});
    if (watch && !s.json && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
    if (s.json) printJson(v);
    else out(renderRolling(v));
    const stopped = TERMINAL.includes(v.phase) || v.phase === 'paused';
    if (!watch || stopped) {
      if (v.phase === 'rolled_back' || v.phase === 'failed' || (v.phase === 'paused' && v.paused_reason?.startsWith('failure'))) process.exitCode = 1;
      return;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export function registerRolling(rollout: Command): void {
  withCommon(
    withSettings(
      rollout
        .command('rolling')
        .description(
          "replace the active version's workers by --to's a few at a time: the new ones as their own pool (never mixed with the old card), the route following ready capacity, old ones drained and stopped",
        )
        .requiredOption('--to <version>', 'the registered version to roll to')
        .option('--partition <n>', 'stop with this many old workers left (resume with a lower one)')
        .option('-w, --watch', 'follow the update until it ends or pauses')
        .option('--interval <ms>', 'refresh interval with --watch (default 1000)'),
    ),
    { model: 'one' },
  ).action(async (o: CommonOptions & SettingsFlags & { to: string; partition?: string; watch?: boolean; interval?: string }) => {
    const s = session(o);
    const to = textFlag('--to', o.to) as string;
    const body = { to, ...settingsBody(o), ...(o.partition !== undefined ? { partition: partitionFlag(o.partition) } : {}) };
    const interval = msFlag('--interval', o.interval) ?? 1000;
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<RollingView>(modelPath(model, '/rolling'), body);
    if (!o.watch) {
      if (s.json) return printJson(v);
      out(`Started ${v.id}: ${v.from} → ${v.to}; follow it with \`glidepath rollout status --model ${model} --watch\``);
      return;
    }
    await follow(s, model, v.id, true, interval);
  });

  withCommon(
    rollout
      .command('status')
      .description('the running (or last) rolling update: a progress bar per role, surge and unavailable used, weights, step, elapsed, ETA')
      .option('--id <rollout>', 'a past update instead of the current one')
      .option('-w, --watch', 'refresh until it ends or pauses')
      .option('--interval <ms>', 'refresh interval with --watch (default 1000)'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { id?: string; watch?: boolean; interval?: string }) => {
    const s = session(o);
    const interval = msFlag('--interval', o.interval) ?? 1000;
    const id = textFlag('--id', o.id);
    const model = await resolveModel(s, o.model);
    await follow(s, model, id, o.watch === true, interval);
  });

  withCommon(
    withSettings(
      rollout
        .command('restart')
        .description(
          "replace the active version's workers by fresh ones of the same version, a few at a time under the same budgets (a provider setting that keeps the card — a log level, an environment variable — applied without a new version)",
        )
        .option('-w, --watch', 'follow it until it ends or pauses')
        .option('--interval <ms>', 'refresh interval with --watch (default 1000)'),
    ),
    { model: 'one' },
  ).action(async (o: CommonOptions & SettingsFlags & { watch?: boolean; interval?: string }) => {
    const s = session(o);
    const body = settingsBody(o);
    const interval = msFlag('--interval', o.interval) ?? 1000;
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<RollingView>(modelPath(model, '/rolling/restart'), body);
    if (o.watch) return follow(s, model, v.id, true, interval);
    if (s.json) return printJson(v);
    out(`Started ${v.id}: restarting ${v.to}'s workers in place; follow it with \`glidepath rollout status --model ${model} --watch\``);
  });

  const verbs = {
    pause: 'hold the rolling update where it is (workers starting finish; nothing else starts or stops)',
    resume: 'continue a paused rolling update (--partition N: with a new partition)',
    abort: 'roll back to the old version with the same budgets',
    undo: 'roll a finished update back to the version it replaced, while its weights are still cached',
  } as const;
  for (const [verb, description] of Object.entries(verbs) as [keyof typeof verbs, string][]) {
    let cmd = rollout.command(verb).description(description);
    if (verb === 'pause' || verb === 'abort') cmd = cmd.option('--reason <text>', 'why (audit log)');
    if (verb === 'resume') cmd = cmd.option('--partition <n>', 'a new partition (0: finish)');
    if (verb === 'undo') cmd = withSettings(cmd);
    withCommon(cmd, { model: 'one' }).action(async (o: CommonOptions & SettingsFlags & { reason?: string; partition?: string }) => {
      const s = session(o);
      const body: Record<string, unknown> =
        verb === 'undo'
          ? settingsBody(o)
          : verb === 'resume'
            ? o.partition !== undefined
              ? { partition: partitionFlag(o.partition) }
              : {}
            : o.reason !== undefined
              ? { reason: textFlag('--reason', o.reason) }
              : {};
      const model = await resolveModel(s, o.model);
      const v = await s.client.post<RollingView>(modelPath(model, `/rolling/${verb}`), body);
      if (s.json) return printJson(v);
      out(`${v.id}: ${v.from} → ${v.to} ${v.phase}${v.message ? ` — ${v.message}` : ''}`);
    });
  }
}
