// The probe sets the health controller checks workers against, per version: cached, read back from
// the registry, stored when recorded or pinned, and a failed recording said loudly and retried with
// back-off (5 s doubling up to the probe interval) — never blocking the version, which serves meanwhile.
import { DEFAULTS } from '../defaults.js';
import type { ProbeSet } from '../domain/probes.js';
import type { Version } from '../domain/version.js';
import { toGlidepathError } from '../errors.js';
import type { ControllerPorts } from '../rollout/ports.js';
import type { HealthHost } from './tracked.js';

export class ProbeSets {
  private readonly sets = new Map<string, ProbeSet>();
  private readonly recording = new Map<string, Promise<ProbeSet | undefined>>();
  /** model/version → when a failed recording may be tried again, and how many failed in a row. */
  private readonly retry = new Map<string, { at: number; failures: number }>();

  constructor(
    private readonly ports: ControllerPorts,
    private readonly host: Pick<HealthHost, 'config' | 'spawn'>,
  ) {}

  /** The set in memory, if any (no store read). */
  cached(model: string, version: string): ProbeSet | undefined {
    return this.sets.get(`${model}/${version}`);
  }

  /** The version's set: cached, read from the registry, or recorded now with `record` (unless a failed recording is backing off). */
  async get(model: string, version: string, record: (v: Version) => Promise<ProbeSet>): Promise<ProbeSet | undefined> {
    const key = `${model}/${version}`;
    const cached = this.sets.get(key);
    if (cached) return cached;
    const v = await this.ports.versions.get(model, version);
    if (v.probes) return this.keep(model, version, v.probes);
    let p = this.recording.get(key);
    if (p === undefined) {
      const r = this.retry.get(key);
      if (r && this.ports.clock.now() < r.at) return undefined;
      p = record(v)
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
