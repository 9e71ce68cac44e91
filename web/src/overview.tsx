// The fleet at a glance: each model with its versions (status, live weight, rates, latency), its
// degradation level, the GPUs, every worker with its health and breaker, and the change events as
// they happen. Weights and rates move with the chart samples; the rest is re-read on each event.
import type { CapacityView, StatusModelView, StatusView, WorkerView } from '../../src/api/types.js';
import { fmt } from './api.js';
import { useLive } from './live.js';
import { useApi } from './use-api.js';

export function Overview() {
  const live = useLive();
  const status = useApi<StatusView>('/status', [live.changes]);
  const workers = useApi<WorkerView[]>('/workers', [live.changes]);
  if (status.error && !status.data) return <p class="error">Could not read the status: {status.error.message}</p>;
  const s = status.data;
  if (!s) return <p aria-busy="true">Loading…</p>;
  return (
    <>
      <section aria-labelledby="fleet-h">
        <h1 id="fleet-h">Fleet</h1>
        <p class="summary">
          <span class={s.ready.ready ? 'badge good' : 'badge bad'}>{s.ready.ready ? 'ready' : 'not ready'}</span> {s.models.length} model(s) · GPUs{' '}
          {s.gpus.total - s.gpus.free} of {s.gpus.total} in use
          {s.ready.problems.length > 0 && <span class="error"> · {s.ready.problems.join('; ')}</span>}
        </p>
        <div class="cards">
          {s.models.map((m) => (
            <ModelCard key={m.model} m={m} />
          ))}
        </div>
      </section>
      <section aria-labelledby="workers-h">
        <h2 id="workers-h">Workers</h2>
        <WorkersTable workers={workers.data ?? []} />
      </section>
      <section aria-labelledby="events-h">
        <h2 id="events-h">Events</h2>
        <EventList />
      </section>
    </>
  );
}

function ModelCard({ m }: { m: StatusModelView }) {
  const live = useLive();
  const cap = useApi<CapacityView>(`/models/${encodeURIComponent(m.model)}/capacity`, [live.changes]);
  const point = live.sample?.models[m.model];
  const weights = m.route && (point === undefined || m.route.revision > point.revision) ? m.route.weights : (point?.weights ?? {});
  return (
    <article class="card" data-testid={`model-${m.model}`}>
      <h2>
        <a href={`#/model/${encodeURIComponent(m.model)}`}>{m.model}</a> <span class="muted">priority {m.priority}</span>
      </h2>
      <p>
        active <strong>{m.active ?? 'none'}</strong> · standby {m.standby ?? 'none'}
        {m.holding && <span class="badge warn"> holding requests</span>}
        {cap.data?.level !== null && cap.data?.level !== undefined && (
          <span class={cap.data.level === 0 ? 'badge good' : 'badge bad'} data-testid="degradation">
            {' '}
            degradation level {cap.data.level}
          </span>
        )}
      </p>
      <table>
        <caption class="sr-only">Versions of {m.model}</caption>
        <thead>
          <tr>
            <th scope="col">version</th>
            <th scope="col">status</th>
            <th scope="col">weight</th>
            <th scope="col">req/s</th>
            <th scope="col">errors</th>
            <th scope="col">TTFT p99</th>
            <th scope="col">workers</th>
          </tr>
        </thead>
        <tbody>
          {m.versions.map((v) => {
            const p = point?.versions[v.version];
            const w = weights[v.version];
            return (
              <tr key={v.version} data-testid={`version-${v.version}`}>
                <th scope="row">
                  <a href={`#/model/${encodeURIComponent(m.model)}/version/${encodeURIComponent(v.version)}`}>{v.version}</a>
                </th>
                <td>
                  <span class={`status ${v.status}`}>{v.status}</span>
                  {v.asleep && ' (asleep)'}
                </td>
                <td data-testid="weight">{w === undefined ? '–' : fmt.pct(w, 0)}</td>
                <td>{fmt.num(p?.rps ?? v.window.rps, 1)}</td>
                <td>{fmt.pct(p?.error_rate ?? v.window.error_rate)}</td>
                <td>{fmt.ms(p?.ttft_p99 ?? v.window.ttft_ms.p99)}</td>
                <td>
                  {v.workers.up}/{v.workers.serving}
                  {v.workers.spares_wanted > 0 && ` +${v.workers.spares_ready}/${v.workers.spares_wanted} spare`}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </article>
  );
}

function WorkersTable({ workers }: { workers: WorkerView[] }) {
  if (workers.length === 0) return <p class="muted">No workers.</p>;
  return (
    <div class="scroll">
      <table>
        <thead>
          <tr>
            <th scope="col">worker</th>
            <th scope="col">model / version</th>
            <th scope="col">state</th>
            <th scope="col">health</th>
            <th scope="col">breaker</th>
            <th scope="col">in flight</th>
            <th scope="col">GPUs</th>
          </tr>
        </thead>
        <tbody>
          {workers.map((w) => (
            <tr key={w.id}>
              <th scope="row">
                {w.id}
                {w.role === 'spare' && <span class="muted"> (spare)</span>}
              </th>
              <td>
                {w.model} / {w.version}
              </td>
              <td>{w.state}</td>
              <td>
                <span class={`health ${w.health?.state ?? 'unknown'}`}>{w.health?.state ?? '–'}</span>
                {w.health?.last_failure && <span class="muted"> {w.health.last_failure.reason}</span>}
              </td>
              <td>{w.health?.breaker ?? '–'}</td>
              <td>{w.outstanding}</td>
              <td>{w.gpus.join(', ') || '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function EventList({ model }: { model?: string }) {
  const live = useLive();
  const events = live.events.filter((e) => model === undefined || e.model === model).slice(0, 40);
  if (events.length === 0) return <p class="muted">No events yet.</p>;
  return (
    <ol class="events" aria-live="polite" data-testid="events">
      {events.map((e) => (
        <li key={e.seq}>
          <time>{fmt.time(e.at)}</time> <span class="kind">{e.kind}</span> {e.message}
        </li>
      ))}
    </ol>
  );
}
