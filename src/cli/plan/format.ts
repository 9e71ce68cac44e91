// `glidepath plan`'s text: seed 000's comparison table with the risk, the recommendation and the
// canary stages, from the API's answer (the JSON `plan -o json` prints as it is).
import type { StagePlanView, StrategyPlanView } from '../../api/types.js';
import { fmtMs } from '../../rollout/planner.js';

export function formatPlan(p: StrategyPlanView): string {
  const head = ['STRATEGY', 'EXTRA GPUS', 'OVERHEAD', 'DOWNTIME', 'MAX CAPACITY DROP', 'ROLLBACK', 'TOTAL DEPLOY', 'FEASIBLE'];
  const body = p.rows.map((r) => [
    r.label,
    `${r.extra_gpus} (${Math.round(r.extra_gpus_pct)}%)`,
    `${Math.round(r.steady_overhead_pct)}%`,
    fmtMs(r.downtime_ms),
    `${Math.round(r.max_capacity_drop_pct)}%`,
    fmtMs(r.rollback_ms),
    fmtMs(r.total_deploy_ms),
    r.feasible ? 'yes' : `no: ${r.note ?? ''}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => (row[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  const est = (e: boolean) => (e ? ' (estimated)' : '');
  return [
    `${p.current.id} → ${p.target.id}: ${p.cluster.free_gpus} of ${p.cluster.total_gpus} GPU(s) free; load ${fmtMs(p.target.load_time_ms)}${est(p.target.load_time_estimated)}`,
    `risk: ${p.risk.level} — ${p.risk.reason}`,
    line(head),
    ...body.map(line),
    `recommended: ${p.recommendation.label} — ${p.recommendation.reason}`,
    ...(p.canary_stages ? formatStages(p.canary_stages) : []),
  ].join('\n');
}

/** A stage's time is null when there is no traffic to time it by. */
function formatStages(sp: StagePlanView): string[] {
  const out = [`canary stages at ${sp.live_rps.toFixed(1)} req/s live: ${sp.note}`];
  for (const r of sp.stages) {
    out.push(
      `  ${String(r.percent).padStart(3)} %  ${r.samples_needed} samples  ${r.canary_rps.toFixed(2)} req/s  → ${r.duration_ms !== null ? fmtMs(r.duration_ms) : 'waits for traffic'}`,
    );
  }
  out.push(`  total ${sp.total_ms !== null ? fmtMs(sp.total_ms) : 'unknown (no traffic)'}, then promotion`);
  return out;
}
