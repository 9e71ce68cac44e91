// `glidepath workers`: every worker with its version, role, health, breaker, GPUs and load;
// `glidepath workers readmit ID`: put a worker health took out back on probation.
import type { Command } from 'commander';
import { fmtGpus, out, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import type { WorkerHealthView, WorkerView } from '../../api/types.js';

function healthCell(h: WorkerHealthView | null): string {
  return h === null ? '-' : h.state.toUpperCase();
}

function lastFailure(h: WorkerHealthView | null): string {
  const f = h?.last_failure;
  if (!f || h?.state === 'healthy') return '';
  const d = f.detail.length > 60 ? `${f.detail.slice(0, 57)}...` : f.detail;
  return `${f.reason}: ${d}`;
}

export function register(program: Command): void {
  const workers = withCommon(
    program.command('workers').description('workers: version, role, health, breaker, routing weight, GPUs, endpoint, in-flight requests'),
    { model: 'filter' },
  ).action(async (o: CommonOptions) => {
    const s = session(o);
    const ws = await s.client.get<WorkerView[]>('/workers', { model: o.model });
    if (s.json) return printJson(ws);
    if (ws.length === 0) return out(o.model ? `no workers for model ${o.model}` : 'no workers');
    out(
      table(
        ['WORKER', 'VERSION', 'ROLE', 'HEALTH', 'BREAKER', 'WEIGHT', 'STATE', 'GPUS', 'ENDPOINT', 'PID', 'IN_FLIGHT', 'LAST_FAILURE'],
        ws.map((w) => [
          w.id,
          w.version,
          w.role,
          healthCell(w.health),
          w.health?.breaker ?? '-',
          w.weight === null ? '-' : w.ejected_until ? 'ejected' : String(w.weight),
          w.state,
          fmtGpus(w.gpus),
          w.endpoint,
          w.pid,
          w.outstanding,
          lastFailure(w.health),
        ]),
      ),
    );
  });
  withCommon(
    workers.command('readmit <worker>').description('put a worker its health checks took out back on probation: it takes traffic once its probes pass'),
  ).action(async (worker: string, o: CommonOptions) => {
    const s = session(o);
    const h = await s.client.post<WorkerHealthView>('/workers/readmit', { worker });
    if (s.json) return printJson(h);
    out(`${worker}: ${h.state} (takes traffic once its probes pass)`);
  });
}
