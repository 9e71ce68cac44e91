// An adapter canary in the admin API's snake_case: the state, its verdicts (the version canary's
// shapes) and its rollback; the controller's `adapter_canary_*` notifications carry the same view.
import type { AdapterCanaryState, AdapterSide } from './adapter-canary-state.js';
import { currentPercent } from './canary-state.js';
import { stagedStateView } from './canary-views.js';
import type { StagedStateView } from './canary-views.js';

export interface AdapterSideView {
  source: string;
  version: string | null;
  /** The name the engines have it loaded under. */
  served_as: string;
}

export interface AdapterCanaryStateView extends StagedStateView {
  kind: 'adapter_canary';
  /** The base model whose workers serve both sides. */
  model: string;
  adapter: string;
  stable: AdapterSideView;
  candidate: AdapterSideView;
  /** The candidate's share of the adapter's requests now, in percent (0 once it ended). */
  percent: number;
  rollback: {
    reason: string;
    at: number;
    timing: { traffic_shift_ms: number; unload_ms: number; total_ms: number };
    unloaded: number;
    unload_failed: string[];
    /** Workers still serving it when the bounded wait ended: each unloads it after its last request. */
    unload_pending: string[];
    candidate_requests: number;
    percent_at_rollback: number;
  } | null;
}

function side(s: AdapterSide): AdapterSideView {
  return { source: s.source, version: s.version, served_as: s.servedAs };
}

export function adapterCanaryStateView(s: AdapterCanaryState): AdapterCanaryStateView {
  const running = s.phase === 'progressing' || s.phase === 'paused';
  const r = s.rollback;
  return {
    kind: s.kind,
    ...stagedStateView(s),
    adapter: s.adapter,
    stable: side(s.stable),
    candidate: side(s.candidate),
    percent: running ? currentPercent(s) : 0,
    rollback:
      r === undefined
        ? null
        : {
            reason: r.reason,
            at: r.at,
            timing: r.timing,
            unloaded: r.unloaded,
            unload_failed: r.unloadFailed,
            unload_pending: r.unloadPending,
            candidate_requests: r.candidateRequests,
            percent_at_rollback: r.percentAtRollback,
          },
  };
}
