// The probe sets the health controller checks workers against, per version: recorded from a version's
// serving workers (at its load, lazily, or when an operator asks; dissenters marked corrupt), pinned
// by an operator, cached, read back from the registry, and a failed recording said loudly and retried
// with back-off (5 s doubling up to the probe interval) — never blocking the version, which serves meanwhile.
import { DEFAULTS } from '../defaults.js';
import type { ProbeSet } from '../domain/probes.js';
import type { Version } from '../domain/version.js';
import type { ControllerPorts } from '../rollout/ports.js';
import type { Observation } from './machine.js';
import { recordFrom } from './prober.js';
import type { HealthHost, Tracked } from './tracked.js';
import type { WorkerInfo } from '../rollout/ports.js';
import { ConflictError, toGlidepathError } from '../errors.js';

const ACTOR = { name: 'health' };

/** What recording needs of the health controller: its settings, its workers' health, and its verdicts. */
export interface ProbeSetsHost extends Pick<HealthHost, 'config' | 'spawn'> {
  /** The version's serving workers that are not dead (what a set is recorded from). */
  liveServing(model: string, version: string): WorkerInfo[];
  trackedOf(w: WorkerInfo): Tracked;
  observe(t: Tracked, o: Observation): void;
}

export class ProbeSets {
  private readonly sets = new Map<string, ProbeSet>();
  private readonly recording = new Map<string, Promise<ProbeSet | undefined>>();
  /** model/version → when a failed recording may be tried again, and how many failed in a row. */
  private readonly retry = new Map<string, { at: number; failures: number }>();

  constructor(
    private readonly ports: ControllerPorts,
    private readonly host: ProbeSetsHost,
  ) {}

  /** The set in memory, if any (no store read). */
  cached(model: string, version: string): ProbeSet | undefined {
    return this.sets.get(`${model}/${version}`);
  }

  /** The version's set: cached, read from the registry, or recorded now from its serving workers (unless a failed recording is backing off). */
  async get(model: string, version: string): Promise<ProbeSet | undefined> {
    const key = `${model}/${version}`;
    const cached = this.sets.get(key);
    if (cached) return cached;
    const v = await this.ports.versions.get(model, version);
    if (v.probes) return this.keep(model, version, v.probes);
    let p = this.recording.get(key);
    if (p === undefined) {
      const r = this.retry.get(key);
      if (r && this.ports.clock.now() < r.at) return undefined;
      p = this.record(v, this.host.liveServing(model, version))
        .catch((err: unknown) => {
          this.failed(model, version, err);
          return undefined;
        })
        .finally(() => this.recording.delete(key));
      this.recording.set(key, p);
    }
    return p;
  }

  /** Whether the version's last recording failed (none kept since): its prompts do not record on this model. */
  failing(model: string, version: string): boolean {
    return this.retry.has(`${model}/${version}`);
  }

  /** Record and store a version's probe set from `workers`; dissenting workers are marked corrupt. */
  async record(v: Version, workers: readonly WorkerInfo[], actor = ACTOR): Promise<ProbeSet> {
    const cfg = this.host.config(v.model);
    if (!cfg) throw new ConflictError('health_disabled', `health is off for ${v.model} (models[].health.enabled: false): nothing records or checks probes`);
    const r = await recordFrom(this.ports, workers, cfg, v.probeReference);
    await this.ports.versions.setProbes(v.model, v.id, r.set);
    this.keep(v.model, v.id, r.set);
    const why = r.set.basis === 'single' ? ' from a single worker and no probe_reference: nothing checked it' : '';
    this.ports.emit({
      kind: r.set.basis === 'single' ? 'probe_set_unverified' : 'probe_set_recorded',
      model: v.model,
      version: v.id,
      message: `probe set of ${v.model}/${v.id} recorded (${r.set.basis}, ${r.set.probes.length} prompt(s))${why}`,
      data: { by: actor.name, basis: r.set.basis, from: r.set.from, skipped: r.set.skipped },
    });
    const now = this.ports.clock.now();
    for (const w of workers) {
      const t = this.host.trackedOf(w);
      const d = r.dissenters.find((x) => x.worker === w.id);
      if (d) {
        this.host.observe(t, { kind: 'probe_fail', reason: 'token_mismatch', detail: `at the probe set's recording: ${d.detail}` });
        this.ports.telemetry.health.probeFailure(w.model, w.version, 'token_mismatch');
      } else if (t.health.baselineMs === null) {
        t.health = { ...t.health, baselineMs: r.latencyMs.get(w.id) ?? null, since: t.health.since || now };
        t.dirty = true;
      }
    }
    return r.set;
  }

  /** The load hook: a version's first workers are up; record its probe set unless it has one. */
  async recordAtLoad(v: Version, workers: WorkerInfo[]): Promise<void> {
    if (!this.host.config(v.model) || workers.length === 0) return;
    const serving = workers.filter((w) => w.role === 'serving');
    if (v.probes) {
      this.keep(v.model, v.id, v.probes);
      return;
    }
    // a recording that fails does not fail the load (the version serves; its workers are watched by
    // traffic and exits meanwhile); it is said loudly and tried again
    await this.record(v, serving.length > 0 ? serving : workers).catch((err: unknown) => this.failed(v.model, v.id, err));
  }

  /** Pin an operator's probe set (never re-recorded by a deployment). */
  async pin(model: string, version: string, set: ProbeSet): Promise<ProbeSet> {
    await this.ports.versions.setProbes(model, version, set);
    return this.keep(model, version, set);
  }

  /** Record again from the version's serving workers now (an operator asked). */
  async rerecord(model: string, version: string, actor: { name: string }): Promise<ProbeSet> {
    const v = await this.ports.versions.get(model, version);
    const serving = this.host.liveServing(model, version);
    if (serving.length === 0) throw new ConflictError('no_serving_worker', `${model}/${version} has no live serving worker to record the probe set from`);
    return this.record(v, serving, actor);
  }

  /** Keep a set (recorded, pinned, or read back); a recording back-off ends. */
  keep(model: string, version: string, set: ProbeSet): ProbeSet {
    this.sets.set(`${model}/${version}`, set);
    this.retry.delete(`${model}/${version}`);
    return set;
  }

  /** A recording failed: said loudly (event, webhooks), tried again after a back-off. */
  failed(model: string, version: string, err: unknown): void {
    const key = `${model}/${version}`;
    const failures = (this.retry.get(key)?.failures ?? 0) + 1;
    const wait = Math.min(this.host.config(model)?.intervalMs ?? DEFAULTS.health.intervalMs, DEFAULTS.health.recordRetryMs * 2 ** (failures - 1));
    this.retry.set(key, { at: this.ports.clock.now() + wait, failures });
    const e = {
      kind: 'probe_set_failed',
      model,
      version,
      message: `recording the probe set of ${key} failed: ${toGlidepathError(err).message}; its workers are not probed until it is recorded (next try in ${wait} ms)`,
      at: this.ports.clock.now(),
    };
    this.ports.emit(e);
    this.host.spawn('notifying', this.ports.notify(e));
  }

  /** Forget what is kept for versions no worker is tracked of any more (read again if one comes back). */
  prune(versions: ReadonlySet<string>): void {
    for (const m of [this.sets, this.retry] as Map<string, unknown>[]) for (const k of m.keys()) if (!versions.has(k)) m.delete(k);
  }
}
