// `glidepath rollout …`: the rolling update (rolling.ts) and `rollout stop-start --to V`: replace the
// active version without spare GPUs (stop it, start the new one on its GPUs; the old one back if the
// new one fails), showing progress and the downtime.
import type { Command } from 'commander';
import { err, fmtMs, msFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson } from '../output.js';
import type { StopStartView } from '../../api/types.js';
import { registerRolling } from './rolling.js';

export function register(program: Command): void {
  const rollout = program.command('rollout').description('update strategies beyond blue-green and canary (docs/rolling.md)');
  registerRolling(rollout);
  withCommon(
    rollout
      .command('stop-start')
      .description(
        'replace the active version when no GPU is free: hold new requests, drain and unload it, load --to on its GPUs, release; if --to fails to come up the old version is loaded again',
      )
      .requiredOption('--to <version>', 'the registered version to start')
      .option('--drain-timeout <ms>', "how long the old version's requests may take to finish before they are aborted (default: the gateway's drain timeout)")
      .option('--quiet', 'no progress lines'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { to: string; drainTimeout?: string; quiet?: boolean }) => {
    const s = session(o);
    const to = textFlag('--to', o.to) as string;
    const drainTimeoutMs = msFlag('--drain-timeout', o.drainTimeout);
    const model = await resolveModel(s, o.model);
    const t0 = Date.now();
    const r = await s.client.stream<StopStartView>(
      modelPath(model, '/stop-start'),
      { to, ...(drainTimeoutMs ? { drain_timeout_ms: drainTimeoutMs } : {}) },
      (p) => {
        if (o.quiet) return;
        const m = (p as { message?: unknown } | undefined)?.message;
        err(`  [${((Date.now() - t0) / 1000).toFixed(1)}s] ${typeof m === 'string' ? m : JSON.stringify(p)}`);
      },
    );
    if (s.json) return printJson(r);
    out(
      `Stop-start ${r.model}: ${r.from} → ${r.to} with ${fmtMs(r.downtime_ms)} of downtime (new requests held; ${r.to} loaded in ${fmtMs(r.load_ms)} on ${r.freed_gpus} freed GPU(s); ${r.drain.drained} drained, ${r.drain.aborted} aborted)`,
    );
  });
}
