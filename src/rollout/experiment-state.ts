// An A/B experiment's persisted state (the `experiment` kind of src/rollout/rollout-record.ts).
import type { ExperimentResult } from '../analysis/ab-test.js';

export type ExperimentMetric = 'quality' | 'ttft' | 'tpot' | 'latency';
export const EXPERIMENT_METRICS: readonly ExperimentMetric[] = ['quality', 'ttft', 'tpot', 'latency'];

export interface ExperimentState {
  kind: 'experiment';
  id: string;
  model: string;
  a: string;
  b: string;
  split: number;
  metric: ExperimentMetric;
  /** Smallest difference worth detecting (metric units); undefined: the observed one. */
  minDetectableEffect?: number | undefined;
  alpha: number;
  power: number;
  phase: 'running' | 'stopped';
  createdAt: number;
  updatedAt: number;
  actor: string;
  /** Route before the experiment (restored at stop). */
  previousWeights: Record<string, number>;
  previousStable: string;
  result?: (ExperimentResult & { at: number }) | undefined;
  stoppedReason?: string | undefined;
}
