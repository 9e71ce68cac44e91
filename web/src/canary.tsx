// A canary's evidence: its stage and the time in it, when the next decision can come (the power
// analysis' sample count at the live rate), and per metric the verdict with its numbers — both
// versions' summaries, the effect against its tolerance, the Hodges-Lehmann shift with its
// confidence interval, the p-values (always-valid one too) — and the two distributions overlaid.
import { useEffect, useState } from 'preact/hooks';
import type { AlignedData } from 'uplot';
import type { CanaryDistributionsView } from '../../src/api/routes/series.js';
import type { CanaryMetricView, CanaryView, StagePlanView, StrategyPlanView } from '../../src/api/types.js';
import { fmt } from './api.js';
import { Chart, colorOf } from './chart.js';
import { useLive } from './live.js';
import { useApi } from './use-api.js';

export function CanaryPanel({ model, c }: { model: string; c: CanaryView }) {
  const live = useLive();
  // the distributions move with the traffic: re-read with each chart sample while the canary runs
  const [tick, setTick] = useState(0);
  const running = c.next_decision !== null;
  const at = live.sample?.at ?? 0;
  useEffect(() => {
    if (running) setTick((t) => t + 1);
  }, [at, running]);
  const dist = useApi<CanaryDistributionsView>(`/models/${encodeURIComponent(model)}/canary/distributions?id=${encodeURIComponent(c.id)}`, [
    Math.floor(tick / 5),
    live.changes,
  ]);
  const now = at > 0 ? at : Date.now();
  const last = c.last;
  const stage = c.stages[c.stage_index];
  // the stages' expected times at the live rate, from the planner's power analysis (read once per stage)
  const plan = useApi<StrategyPlanView>(running ? `/models/${encodeURIComponent(model)}/plan?to=${encodeURIComponent(c.canary)}` : null, [c.stage_index]);
  const eta = running ? etaMs(c, plan.data?.canary_stages ?? null, now) : null;
  return (
    <div data-testid="canary" data-phase={c.phase}>
      <dl class="facts">
        <dt>phase</dt>
        <dd>
          <span class={`phase ${c.phase}`} data-testid="canary-phase">
            {c.phase}
          </span>
          {c.paused_reason && <span class="muted"> ({c.paused_reason})</span>}
          {c.rollback_reason && <span class="muted"> ({c.rollback_reason})</span>}
        </dd>
        <dt>stage</dt>
        <dd>
          {c.stage_index + 1} of {c.stages.length}: {stage ?? '–'} % (now {fmt.num(c.percent, 0)} %; stages {c.stages.join(' → ')} %)
        </dd>
        <dt>time in stage</dt>
        <dd>{running ? fmt.duration(Math.max(0, now - c.stage_started_at)) : '–'}</dd>
        <dt>next decision</dt>
        <dd>
          {c.next_decision
            ? `in ${fmt.duration(c.next_decision.earliest_ms)} (stage holds ${fmt.duration(c.next_decision.stage_holds_ms)}; ${c.next_decision.samples_needed} more samples${
                c.next_decision.samples_eta_ms === null ? ', no traffic to time them by' : ` ≈ ${fmt.duration(c.next_decision.samples_eta_ms)}`
              })`
            : '–'}
        </dd>
        <dt>ETA</dt>
        <dd data-testid="canary-eta">
          {eta === null ? '–' : `≈ ${fmt.duration(eta)} to the last stage (stage times from the power analysis at the live rate)`}
        </dd>
        <dt>samples</dt>
        <dd>{c.samples ? `stable ${c.samples.stable} · canary ${c.samples.canary} (need ${c.samples.min_samples} each)` : '–'}</dd>
        <dt>last verdict</dt>
        <dd>
          {last ? (
            <>
              <span class={`verdict ${last.outcome}`}>{last.outcome}</span> → {last.action} at look {last.look}, score {fmt.num(last.score, 0)}
              {last.reasons.length > 0 && <span class="muted"> · {last.reasons.join('; ')}</span>}
            </>
          ) : (
            'none yet'
          )}
        </dd>
        {c.rollback && (
          <>
            <dt>rolled back</dt>
            <dd data-testid="canary-rollback">
              at {fmt.num(c.rollback.percent_at_rollback, 0)} % after {c.rollback.canary_requests} canary requests; traffic moved in{' '}
              {fmt.ms(c.rollback.timing.traffic_shift_ms)}: {c.rollback.reason}
            </dd>
          </>
        )}
        {c.judge && (
          <>
            <dt>LLM judge</dt>
            <dd>
              {c.judge.judged} judged, {c.judge.failures} failed, {c.judge.queued} queued{c.judge.last_error && ` · last error: ${c.judge.last_error}`}
            </dd>
          </>
        )}
      </dl>
      {last && <MetricsTable metrics={last.metrics} />}
      {dist.data && <Distributions d={dist.data} />}
    </div>
  );
}

/**
 * What is left of the canary: the rest of this stage, then each later stage, each as long as the
 * planner expects at its share (its samples at the live rate, at least the stage's hold), or the
 * hold alone where the planner has no figure.
 */
function etaMs(c: CanaryView, plan: StagePlanView | null, now: number): number | null {
  const durationAt = (percent: number) => plan?.stages.find((s) => s.percent === percent)?.duration_ms ?? c.stage_duration_ms;
  const current = c.stages[c.stage_index];
  if (current === undefined) return null;
  let left = Math.max(0, durationAt(current) - (now - c.stage_started_at));
  for (const p of c.stages.slice(c.stage_index + 1)) if (p < 100) left += durationAt(p);
  return left;
}

function MetricsTable({ metrics }: { metrics: CanaryMetricView[] }) {
  return (
    <div class="scroll">
      <table data-testid="canary-metrics">
        <caption>Per metric, at the last look (effects in the bad direction; fail only when significant and past the tolerance)</caption>
        <thead>
          <tr>
            <th scope="col">metric</th>
            <th scope="col">verdict</th>
            <th scope="col">stable</th>
            <th scope="col">canary</th>
            <th scope="col">shift [CI]</th>
            <th scope="col">check</th>
            <th scope="col">effect / tolerance</th>
            <th scope="col">p</th>
            <th scope="col">p (always valid)</th>
          </tr>
        </thead>
        <tbody>
          {metrics.flatMap((m) =>
            (m.checks.length > 0 ? m.checks : [null]).map((c, i) => (
              <tr key={`${m.name}-${c?.id ?? i}`} data-metric={m.name}>
                {i === 0 && (
                  <>
                    <th scope="row" rowSpan={Math.max(1, m.checks.length)}>
                      {m.name}
                    </th>
                    <td rowSpan={Math.max(1, m.checks.length)} title={m.reason}>
                      <span class={`verdict ${m.outcome}`}>{m.outcome}</span>
                    </td>
                    <td rowSpan={Math.max(1, m.checks.length)}>{summary(m.stable)}</td>
                    <td rowSpan={Math.max(1, m.checks.length)}>{summary(m.canary)}</td>
                    <td rowSpan={Math.max(1, m.checks.length)}>
                      {m.shift
                        ? `${fmt.num(m.shift.estimate, 1)} [${fmt.num(m.shift.lower, 1)}, ${fmt.num(m.shift.upper, 1)}] (${fmt.pct(m.shift.conf_level, 0)})`
                        : '–'}
                    </td>
                  </>
                )}
                <td>{c?.id ?? '–'}</td>
                <td>{c ? `${fmt.num(c.effect, 3)} / ${fmt.num(c.threshold, 3)}` : '–'}</td>
                <td>{fmt.p(c?.p_value)}</td>
                <td>{fmt.p(c?.p_value_sequential)}</td>
              </tr>
            )),
          )}
        </tbody>
      </table>
    </div>
  );
}

function summary(s: CanaryMetricView['stable']): string {
  const parts = [`n ${s.n ?? '–'}`];
  if (s.median !== undefined) parts.push(`median ${fmt.num(s.median, 1)}`);
  if (s.p99 !== undefined) parts.push(`p99 ${fmt.num(s.p99, 1)}`);
  if (s.rate !== undefined) parts.push(`rate ${fmt.pct(s.rate, 2)}`);
  if (s.throughput !== undefined) parts.push(`${fmt.num(s.throughput, 1)}/s`);
  return parts.join(' · ');
}

function Distributions({ d }: { d: CanaryDistributionsView }) {
  const both = [d.stable, d.canary];
  const series = [
    { label: `${d.stable} (stable)`, color: colorOf(both, d.stable) },
    { label: `${d.canary} (canary)`, color: colorOf(both, d.canary), dash: [6, 3] },
  ];
  const charts = [
    ['TTFT', d.metrics.ttft_ms],
    ['TPOT', d.metrics.tpot_ms],
    ['Latency', d.metrics.latency_ms],
  ] as const;
  return (
    <div class="charts" data-testid="distributions">
      {charts.map(([name, e]) =>
        e.x.length === 0 ? (
          <p key={name} class="muted">
            {name}: no samples yet
          </p>
        ) : (
          <Chart
            key={name}
            title={`${name} distribution (ECDF; n ${e.n_stable} vs ${e.n_canary})`}
            data={[e.x, e.stable, e.canary] as AlignedData}
            series={series}
            yLabel="share ≤ x"
            xLabel="ms"
            time={false}
            yRange={[0, 1]}
          />
        ),
      )}
    </div>
  );
}
