// A version's health in one word from its workers' (what `version show` and the API say instead of
// "unknown"): healthy when every serving worker is, degraded while some take no traffic or take
// less, unhealthy when none takes any.
import type { HealthSummary } from '../domain/version.js';
import type { WorkerHealth } from './machine.js';
import { routingWeightOf } from './persisted.js';

export interface WorkerState {
  id: string;
  role: 'serving' | 'spare';
  health: WorkerHealth | undefined;
}

export function summarize(workers: readonly WorkerState[]): HealthSummary {
  const serving = workers.filter((w) => w.role === 'serving');
  if (serving.length === 0) return { state: 'unknown', detail: 'no serving worker' };
  const up = serving.filter((w) => routingWeightOf('serving', w.health) > 0);
  const full = serving.filter((w) => w.health === undefined || w.health.state === 'healthy');
  const checkedAt = Math.max(0, ...serving.map((w) => w.health?.since ?? 0)) || undefined;
  const trouble = serving
    .filter((w) => w.health !== undefined && w.health.state !== 'healthy')
    .map((w) => {
      const h = w.health as WorkerHealth;
      return `${w.id} ${h.state}${h.lastFailure ? ` (${h.lastFailure.reason})` : ''}`;
    });
  const spares = workers.filter((w) => w.role === 'spare' && w.health?.state === 'healthy').length;
  const detail = [`${up.length} of ${serving.length} serving worker(s) take traffic`, ...trouble, ...(spares > 0 ? [`${spares} spare(s) ready`] : [])].join(
    '; ',
  );
  const state = up.length === 0 ? 'unhealthy' : full.length === serving.length ? 'healthy' : 'degraded';
  return { state, checkedAt, healthyWorkers: up.length, totalWorkers: serving.length, detail };
}
