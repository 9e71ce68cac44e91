// A model's page: its route and the history of its weights, request and error rates and TTFT/TPOT
// p50/p99 per version (charted from the sampled series, extended live by the stream), the running
// canary, experiment or rolling update with its evidence, and the actions an operator may take.
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { AlignedData } from 'uplot';
import type { SeriesPointView, SeriesView } from '../../src/api/series.js';
import type { CanaryView, ExperimentView, RollingView, StatusView } from '../../src/api/types.js';
import { fmt } from './api.js';
import { CanaryPanel } from './canary.js';
import { Chart, colorOf } from './chart.js';
import { ModelActions } from './model-actions.js';
import { JudgeSamples } from './judge.js';
import { EventList } from './overview.js';
import { useLive } from './live.js';
import { useApi } from './use-api.js';

/** Points drawn at most (15 min at one a second): the ring's size on the server too. */
const MAX_POINTS = 900;

export function ModelPage({ model, role }: { model: string; role: string }) {
  const live = useLive();
  const m = encodeURIComponent(model);
  const status = useApi<StatusView>('/status', [live.changes]);
  const canary = useApi<CanaryView>(`/models/${m}/canary`, [live.changes]);
  const experiment = useApi<ExperimentView>(`/models/${m}/experiments`, [live.changes]);
  const rolling = useApi<RollingView>(`/models/${m}/rolling`, [live.changes]);
  const points = useSeries(model);
  const st = status.data?.models.find((x) => x.model === model);
  if (status.data && !st) return <p class="error">No model {model}.</p>;
  // the freshest of the last sample and the status (re-read on every route event, between samples)
  const lastPoint = points.at(-1);
  const weights = st?.route && (lastPoint === undefined || st.route.revision > lastPoint.revision) ? st.route.weights : (lastPoint?.weights ?? {});
  const allVersions = versionsOf(points);
  const running = canary.data && !['succeeded', 'rolled_back', 'aborted', 'failed'].includes(canary.data.phase);

  return (
    <>
      <h1>
        {model} <span class="muted">{st ? `active ${st.active ?? 'none'} · standby ${st.standby ?? 'none'}` : ''}</span>
      </h1>
      <section aria-labelledby="route-h">
        <h2 id="route-h">Route</h2>
        <p data-testid="route">
          {Object.entries(weights).map(([v, w]) => (
            <span key={v} class="weight" data-version={v} data-weight={w}>
              <span class="swatch" style={{ background: colorOf(allVersions, v) }} aria-hidden="true" />
              {v} {fmt.pct(w, 0)}
            </span>
          ))}
          {st?.route && <span class="muted"> revision {st.route.revision}</span>}
        </p>
        {st && <ModelActions model={model} st={st} canary={running ? canary.data : undefined} role={role} />}
      </section>
      <Charts points={points} />
      {canary.data && (
        <section aria-labelledby="canary-h">
          <h2 id="canary-h">Canary {canary.data.canary}</h2>
          <CanaryPanel model={model} c={canary.data} />
        </section>
      )}
      {experiment.data && <ExperimentPanel e={experiment.data} />}
      {rolling.data && <RollingPanel r={rolling.data} />}
      <JudgeSamples model={model} changes={live.changes} />
      <section aria-labelledby="mevents-h">
        <h2 id="mevents-h">Events of {model}</h2>
        <EventList model={model} />
      </section>
    </>
  );
}

/** The model's history from the server, then every live sample appended (bounded). */
function useSeries(model: string): SeriesPointView[] {
  const live = useLive();
  const hist = useApi<SeriesView>(`/models/${encodeURIComponent(model)}/series`);
  const [points, setPoints] = useState<SeriesPointView[]>([]);
  useEffect(() => setPoints(hist.data?.points ?? []), [hist.data]);
  const sample = live.sample?.models[model];
  useEffect(() => {
    if (sample === undefined) return;
    setPoints((ps) => (ps.length > 0 && (ps.at(-1) as SeriesPointView).at >= sample.at ? ps : [...ps, sample].slice(-MAX_POINTS)));
  }, [sample]);
  return points;
}

function versionsOf(points: SeriesPointView[]): string[] {
  return [...new Set(points.flatMap((p) => [...Object.keys(p.weights), ...Object.keys(p.versions)]))].sort();
}

function Charts({ points }: { points: SeriesPointView[] }) {
  const versions = useMemo(() => versionsOf(points), [points]);
  const data = useMemo(() => {
    const x = points.map((p) => p.at / 1000);
    const per = (f: (p: SeriesPointView, v: string) => number | null | undefined) => versions.map((v) => points.map((p) => f(p, v) ?? null));
    return {
      weights: [x, ...per((p, v) => p.weights[v] ?? 0)] as AlignedData,
      rps: [x, ...per((p, v) => p.versions[v]?.rps)] as AlignedData,
      errors: [x, ...per((p, v) => p.versions[v]?.error_rate)] as AlignedData,
      ttft: [x, ...per((p, v) => p.versions[v]?.ttft_p50), ...per((p, v) => p.versions[v]?.ttft_p99)] as AlignedData,
      tpot: [x, ...per((p, v) => p.versions[v]?.tpot_p50), ...per((p, v) => p.versions[v]?.tpot_p99)] as AlignedData,
    };
  }, [points, versions]);
  const one = versions.map((v) => ({ label: v, color: colorOf(versions, v) }));
  const two = [...one.map((s) => ({ ...s, label: `${s.label} p50` })), ...one.map((s) => ({ ...s, label: `${s.label} p99`, dash: [6, 4] }))];
  if (points.length === 0) return <p class="muted">Collecting samples (one a second)…</p>;
  return (
    <section aria-labelledby="charts-h">
      <h2 id="charts-h">Over time</h2>
      <div class="charts">
        <Chart title="Route weights" data={data.weights} series={one} yLabel="weight" yRange={[0, 1]} step />
        <Chart title="Requests per second" data={data.rps} series={one} yLabel="req/s" />
        <Chart title="Error rate" data={data.errors} series={one} yLabel="errors" />
        <Chart title="TTFT p50 / p99 (dashed)" data={data.ttft} series={two} yLabel="ms" />
        <Chart title="TPOT p50 / p99 (dashed)" data={data.tpot} series={two} yLabel="ms" />
      </div>
    </section>
  );
}

function ExperimentPanel({ e }: { e: ExperimentView }) {
  const r = e.result;
  return (
    <section aria-labelledby="exp-h">
      <h2 id="exp-h">
        Experiment {e.a} vs {e.b} <span class="muted">({e.phase})</span>
      </h2>
      <dl class="facts">
        <dt>metric</dt>
        <dd>{e.metric}</dd>
        <dt>split</dt>
        <dd>{fmt.pct(e.split, 0)} to b</dd>
        <dt>samples</dt>
        <dd>{r ? `${r.n_a} / ${r.n_b}` : '–'}</dd>
        <dt>decision</dt>
        <dd>{r?.decision ?? '–'}</dd>
        <dt>shift (b − a)</dt>
        <dd>{r ? `${fmt.num(r.hl_shift)} [${fmt.num(r.hl_ci[0])}, ${fmt.num(r.hl_ci[1])}]` : '–'}</dd>
        <dt>p (always valid)</dt>
        <dd>{fmt.p(r?.p_value_sequential)}</dd>
        <dt>more samples needed</dt>
        <dd>{r?.additional_samples_needed ?? '–'}</dd>
      </dl>
    </section>
  );
}

function RollingPanel({ r }: { r: RollingView }) {
  return (
    <section aria-labelledby="roll-h">
      <h2 id="roll-h">
        Rolling update {r.from} → {r.to} <span class="muted">({r.phase})</span>
      </h2>
      <dl class="facts">
        <dt>step</dt>
        <dd>{r.step}</dd>
        <dt>direction</dt>
        <dd>{r.direction}</dd>
        <dt>elapsed</dt>
        <dd>{fmt.duration(r.elapsed_ms)}</dd>
        <dt>ETA</dt>
        <dd>{fmt.duration(r.eta_ms)}</dd>
        <dt>budgets</dt>
        <dd>
          surge {String(r.max_surge)}, unavailable {String(r.max_unavailable)}
        </dd>
        {r.message && (
          <>
            <dt>message</dt>
            <dd>{r.message}</dd>
          </>
        )}
      </dl>
    </section>
  );
}
