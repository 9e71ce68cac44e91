// `glidepath plan --to V`: seed 000's strategy comparison for this cluster (extra GPUs, downtime,
// capacity drop, rollback and deploy time) from the real inventory and measured load times.
import type { Command } from 'commander';
import type { StrategyPlanView } from '../../api/types.js';
import { modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson } from '../output.js';
import { formatPlan } from './format.js';

export function register(program: Command): void {
  withCommon(
    program
      .command('plan')
      .description('compare deployment strategies for moving the active version to --to on this cluster, with a recommendation')
      .requiredOption('--to <version>', 'the version to move to'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { to: string }) => {
    const s = session(o);
    const to = textFlag('--to', o.to) as string; // a required option: commander refuses a missing one
    const model = await resolveModel(s, o.model);
    const p = await s.client.get<StrategyPlanView>(modelPath(model, '/plan'), { to });
    if (s.json) return printJson(p);
    out(formatPlan(p));
  });
}
