// What the admin API shows for versions, workers and the whole system (JSON shapes the CLI prints).
import type { ControlPlane } from '../control/plane.js';
import type { Architecture } from '../domain/card.js';
import type { HealthSummary, Version, VersionTransition } from '../domain/version.js';
import type { AuditEntry } from '../store/types.js';
import { windowView } from './rollout-views.js';
import type { ProbeSet } from '../domain/probes.js';
import type { WorkerHealth } from '../health/machine.js';
import { parseHealth } from '../health/persisted.js';
import { summarize } from '../health/summary.js';
import type {
  ArchitectureView,
  AuditView,
  HealthView,
  ProbeSetView,
  StatusModelView,
  StatusView,
  TransitionView,
  VersionView,
  WorkerHealthView,
  WorkerView,
} from './types.js';

function healthView(h: HealthSummary): HealthView {
  return {
    state: h.state,
    checked_at: h.checkedAt ?? null,
    error_rate: h.errorRate ?? null,
    p99_latency_ms: h.p99LatencyMs ?? null,
    healthy_workers: h.healthyWorkers ?? null,
    total_workers: h.totalWorkers ?? null,
    detail: h.detail ?? null,
  };
}

function architectureView(a: Architecture): ArchitectureView {
  return {
    layers: a.layers,
    kv_heads: a.kvHeads,
    head_dim: a.headDim,
    block_size: a.blockSize,
    max_context: a.maxContext,
    tokenizer: a.tokenizer,
    family: a.family ?? null,
  };
}

export function transitionView(t: VersionTransition): TransitionView {
  return { from: t.from, to: t.to, at: t.at, actor: t.actor ?? null, reason: t.reason ?? null };
}

export function auditView(e: AuditEntry): AuditView {
  return {
    id: e.id,
    at: e.at,
    actor: e.actor,
    action: e.action,
    target: e.target ?? null,
    params: e.params,
    result: e.result,
    error_code: e.errorCode ?? null,
    duration_ms: e.durationMs ?? null,
  };
}

/** A loaded version's health from its workers' (when health is on for its model); the stored summary otherwise. */
function liveHealth(cp: ControlPlane, v: Version): HealthSummary {
  const ws = cp.workers.infos(v.model, v.id);
  if (ws.length === 0 || !cp.modelConfig(v.model).health?.enabled) return v.health;
  return summarize(ws);
}

export function workerHealthView(h: WorkerHealth): WorkerHealthView {
  return {
    state: h.state,
    breaker: h.breaker,
    since: h.since,
    failures: h.failures,
    traffic_failures: h.trafficFailures,
    failed_recoveries: h.failedRecoveries,
    open_until: h.openUntil,
    trial_left: h.trialLeft,
    baseline_ms: h.baselineMs,
    corrupt: h.corrupt,
    last_failure: h.lastFailure,
  };
}

export function probeSetView(p: ProbeSet): ProbeSetView {
  return {
    basis: p.basis,
    recorded_at: p.recordedAt,
    from: p.from,
    pinned: p.pinned,
    probes: p.probes.map((x) => ({ prompt: x.prompt, max_tokens: x.maxTokens, tokens: x.tokens, logprobs: x.logprobs })),
    skipped: p.skipped,
  };
}

export function versionView(cp: ControlPlane, v: Version): VersionView {
  const route = cp.dp.models.get(v.model)?.route;
  const weight = route?.versions.find((x) => x.id === v.id)?.weight;
  return {
    model: v.model,
    version: v.id,
    status: v.status,
    weight: weight ?? null,
    loaded_at: v.loadedAt ?? null,
    load_time_ms: v.loadTimeMs ?? null,
    gpus: v.gpus,
    tp: v.tp,
    replicas: v.replicas,
    card_checksum: v.cardChecksum,
    weights: v.weights,
    weight_hash: v.weightHash ?? null,
    base_model: v.baseModel,
    quantization: v.quantization,
    architecture: architectureView(v.architecture),
    gpu_memory_gb: v.gpuMemoryGb,
    warmup_tokens: v.warmupTokens,
    provider: v.provider.kind,
    rollback_eligible: v.rollbackEligible,
    rollback_blocked_reason: v.rollbackBlockedReason ?? null,
    asleep: cp.workers.isAsleep(v.model, v.id),
    health: healthView(liveHealth(cp, v)),
    failure: v.failure ? { code: v.failure.code ?? null, message: v.failure.message, at: v.failure.at, from: v.failure.from } : null,
    metadata: v.metadata,
    registered_at: v.registeredAt,
  };
}

export async function workersView(cp: ControlPlane, model?: string): Promise<WorkerView[]> {
  const out: WorkerView[] = [];
  const now = Date.now();
  for (const rec of await cp.store.listWorkers(model ? { model } : {})) {
    const pool = cp.dp.models.get(rec.model)?.pools.get(rec.versionId);
    const w = pool?.workers.find((x) => x.id === rec.id);
    // the live health (saved on every change of state) or, for a worker not running here, the stored one
    const health = cp.workers.meta.get(rec.id)?.health ?? parseHealth(rec.health);
    out.push({
      id: rec.id,
      model: rec.model,
      version: rec.versionId,
      endpoint: rec.endpoint,
      provider: rec.provider,
      pid: rec.pid ?? null,
      state: rec.state,
      role: cp.workers.meta.get(rec.id)?.role ?? rec.role ?? 'serving',
      gpus: rec.gpus,
      routable: w ? w.routable && w.weight > 0 && w.ejectedUntil <= now : false,
      weight: w ? w.weight : null,
      outstanding: w?.outstanding ?? 0,
      ejected_until: w && w.ejectedUntil > now ? w.ejectedUntil : null,
      started_at: rec.startedAt,
      log_file: typeof rec.info?.logFile === 'string' ? rec.info.logFile : null,
      health: health ? workerHealthView(health) : null,
    });
  }
  return out;
}

export async function statusView(cp: ControlPlane): Promise<StatusView> {
  const models: StatusModelView[] = [];
  for (const m of cp.cfg.models) {
    const st = cp.dp.models.get(m.name);
    const [active, standbys, versions] = await Promise.all([cp.registry.active(m.name), cp.registry.standbys(m.name), cp.registry.list(m.name)]);
    const standby = standbys.find((v) => v.rollbackEligible);
    models.push({
      model: m.name,
      priority: m.priority,
      active: active?.id ?? null,
      standby: standby?.id ?? null,
      standbys: standbys.map((v) => ({ version: v.id, rollback_eligible: v.rollbackEligible, blocked_reason: v.rollbackBlockedReason ?? null })),
      route: st
        ? {
            revision: st.route.revision,
            stable: st.route.stable,
            weights: Object.fromEntries(st.route.versions.map((v) => [v.id, v.weight])),
            shares: st.split.shares(),
          }
        : null,
      holding: st?.hold !== undefined,
      versions: versions.map((v) => {
        const ws = cp.workers.infos(m.name, v.id);
        const serving = ws.filter((w) => w.role === 'serving');
        return {
          version: v.id,
          status: v.status,
          asleep: cp.workers.isAsleep(m.name, v.id),
          window: windowView(cp.dp.telemetry.stats(m.name, v.id)),
          workers: {
            up: summarize(ws).healthyWorkers ?? 0,
            serving: serving.length,
            spares_ready: ws.filter((w) => w.role === 'spare' && w.health?.state === 'healthy').length,
            spares_wanted: ws.length > 0 ? (v.spares ?? 0) : 0,
          },
        };
      }),
    });
  }
  return {
    ready: cp.dp.ready(),
    models,
    gpus: { total: cp.inventory.total, free: (await cp.inventory.free()).length },
  };
}
