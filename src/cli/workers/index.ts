// `glidepath workers`: every worker with its version, state, GPUs and load.
import type { Command } from 'commander';
import { fmtGpus, out, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import type { WorkerView } from '../../api/types.js';

export function register(program: Command): void {
  withCommon(program.command('workers').description('workers: version, state, GPUs, endpoint, in-flight requests'), { model: 'filter' }).action(
    async (o: CommonOptions) => {
      const s = session(o);
      const ws = await s.client.get<WorkerView[]>('/workers', { model: o.model });
      if (s.json) return printJson(ws);
      if (ws.length === 0) return out(o.model ? `no workers for model ${o.model}` : 'no workers');
      out(
        table(
          ['WORKER', 'MODEL', 'VERSION', 'STATE', 'GPUS', 'ENDPOINT', 'PID', 'IN_FLIGHT', 'ROUTABLE'],
          ws.map((w) => [
            w.id,
            w.model,
            w.version,
            w.state,
            fmtGpus(w.gpus),
            w.endpoint,
            w.pid,
            w.outstanding,
            w.routable ? 'yes' : w.ejected_until ? 'ejected' : 'no',
          ]),
        ),
      );
    },
  );
}
