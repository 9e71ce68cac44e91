// `glidepath status`: every model's active and standby versions, route and versions, and the GPUs.
import type { Command } from 'commander';
import type { StatusView } from '../../api/types.js';
import { fmtPct, fmtWeights, out, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import { NotFoundError } from '../../errors.js';

export function register(program: Command): void {
  withCommon(program.command('status').description('models, active/standby versions, routes and GPUs at a glance'), { model: 'filter' }).action(
    async (o: CommonOptions) => {
      const s = session(o);
      const st = await s.client.get<StatusView>('/status');
      const models = o.model === undefined ? st.models : st.models.filter((m) => m.model === o.model);
      if (o.model !== undefined && models.length === 0) {
        throw new NotFoundError('model_not_found', `model ${JSON.stringify(o.model)} is not served (models: ${st.models.map((m) => m.model).join(', ')})`);
      }
      if (s.json) return printJson(o.model === undefined ? st : { ...st, models });
      out(`ready: ${st.ready.ready ? 'yes' : `no (${st.ready.problems.join('; ')})`}   GPUs: ${st.gpus.free} free of ${st.gpus.total}`);
      out('');
      out(
        table(
          ['MODEL', 'PRIORITY', 'ACTIVE', 'STANDBY', 'ROUTE', 'REVISION'],
          models.map((m) => [m.model, m.priority, m.active, m.standby, `${fmtWeights(m.route?.weights)}${m.holding ? ' (holding)' : ''}`, m.route?.revision]),
        ),
      );
      for (const m of models) {
        out('');
        out(
          table(
            [`${m.model.toUpperCase()} VERSION`, 'STATUS', 'WEIGHT', 'REQUESTS', 'ERRORS', 'P99_LATENCY'],
            m.versions.map((v) => [
              v.version,
              `${v.status}${v.asleep ? ' (asleep)' : ''}`,
              m.route ? fmtPct(m.route.weights[v.version] ?? null) : '-',
              v.window.requests,
              v.window.error_rate === null ? '-' : fmtPct(v.window.error_rate),
              v.window.latency_ms.p99 === null ? '-' : `${Math.round(v.window.latency_ms.p99)} ms`,
            ]),
          ),
        );
      }
    },
  );
}
