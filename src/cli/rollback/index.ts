// `glidepath rollback --instant`: route back to the standby version by one snapshot swap.
import type { Command } from 'commander';
import { enc, fmtGpus, fmtMs, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson } from '../output.js';
import type { RollbackView, VersionView } from '../../api/types.js';

export function register(program: Command): void {
  withCommon(
    program
      .command('rollback')
      .description('instant rollback: send all traffic back to the standby version (one route swap; wakes a sleeping standby first)')
      .option('--instant', 'route switch to the loaded standby (the default and, for now, the only kind)')
      .option('--reason <text>', 'why, for the audit log and the history'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { instant?: boolean; reason?: string }) => {
    const s = session(o);
    const reason = textFlag('--reason', o.reason);
    const model = await resolveModel(s, o.model);
    const r = await s.client.post<RollbackView>(modelPath(model, '/rollback'), reason === undefined ? {} : { reason }, { long: true });
    if (s.json) return printJson(r);
    const woke = r.wake_ms > 0 ? ` (after waking the sleeping standby for ${fmtMs(r.wake_ms)}; ${fmtMs(r.total_ms)} in all)` : '';
    out(`Rolled back to ${r.rolled_back_to} in ${fmtMs(r.elapsed_ms)}${woke}`);
    // the GPUs are a courtesy line: the rollback is done even if this lookup fails
    const v = await s.client.get<VersionView>(modelPath(model, `/versions/${enc(r.rolled_back_to)}`)).catch(() => undefined);
    if (v) out(`Traffic now serving from ${fmtGpus(v.gpus)}${r.rolled_back_from ? `; ${r.rolled_back_from} is standby, blocked as a rollback target` : ''}`);
  });
}
