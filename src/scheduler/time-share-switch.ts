// A time-share group's state and its switch (docs/multi-model.md#temporal-sharing): the awake
// model's requests held and those in flight finished, its versions asleep, the next one's serving
// versions woken, its requests released. A switch that cannot finish leaves the group serving: the
// model that was to sleep wakes again. Measured, audited, emitted; behind the ports.
import type { TimeShareConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { ConflictError, toGlidepathError } from '../errors.js';
import { whenServing } from '../rollout/bluegreen.js';
import type { Actor, ControllerPorts } from '../rollout/ports.js';
import type { Turn } from './time-share-plan.js';

/** The controller's actor in audits; its hold's owner in the data plane. */
export const SWITCH_ACTOR: Actor = { name: 'time-share' };
const OWNER = 'time-share';
const T = DEFAULTS.timeShare;

/** A switch, as `scheduler status` shows it. */
export interface SwitchRecord {
  at: number;
  group: string;
  from: string | undefined;
  to: string;
  why: string;
  /** The awake model's requests in flight finishing, its sleep, the next one's wake, all of it (ms). */
  drainMs?: number | undefined;
  sleepMs?: number | undefined;
  wakeMs?: number | undefined;
  totalMs: number;
  /** Requests of `to` that waited for it and were released. */
  released: number;
  outcome: string;
}

/** One group's state. */
export class Group {
  awake: string | undefined;
  since = 0;
  /** The model a switch under way gives the GPUs to. */
  switchingTo: string | undefined;
  looking = false;
  lookAgain = false;
  /** model → requests held and when the first of them arrived. */
  readonly held = new Map<string, { depth: number; since: number }>();
  readonly lastActivity = new Map<string, number>();
  /** model → its switches that failed in a row, and until when it is passed over. */
  readonly failures = new Map<string, { n: number; until: number }>();
  decision: Turn | undefined;
  /** A switch's sleep and wake, the last measured (the drain depends on the requests in flight, not on the switch). */
  switchMs: number;
  cancelTimer: (() => void) | undefined;
  readonly history: SwitchRecord[] = [];

  constructor(
    readonly cfg: TimeShareConfig,
    switchMs: number,
  ) {
    this.switchMs = switchMs;
  }

  get switching(): boolean {
    return this.switchingTo !== undefined;
  }

  /** A switch to `model` failed: it is passed over for a back-off, doubling with each failure in a row. */
  failed(model: string, now: number): void {
    const n = (this.failures.get(model)?.n ?? 0) + 1;
    this.failures.set(model, { n, until: now + Math.min(T.backoffMaxMs, T.backoffBaseMs * 2 ** (n - 1)) });
  }
}

export class Switcher {
  constructor(
    private readonly ports: ControllerPorts,
    private readonly drainTimeoutMs: number,
  ) {}

  /** The versions of a model with workers awake. */
  awakeVersions(model: string): string[] {
    const versions = new Set(this.ports.workers.list(model).map((w) => w.version));
    return [...versions].filter((v) => !this.ports.workers.isAsleep(model, v)).sort();
  }

  /** The versions its route sends requests to that have workers (a standby at weight 0 is not one). */
  servingVersions(model: string): string[] {
    const live = new Set(this.ports.workers.list(model).map((w) => w.version));
    return this.ports.routes
      .current(model)
      .versions.filter((v) => v.weight > 0 && live.has(v.id))
      .map((v) => v.id);
  }

  /** Hold a model's requests for the group (its own hold: a swap's release does not end it), watching how many wait. */
  hold(g: Group, model: string, onFirst: () => void): void {
    const p = this.ports;
    p.routes.hold(model, {
      owner: OWNER,
      max: g.cfg.maxHeld,
      timeoutMs: g.cfg.maxWaitMs,
      why: `is asleep on the GPUs it time-shares (group ${g.cfg.name}) until its turn`,
      onDepth: (depth) => {
        const h = g.held.get(model);
        if (depth === 0) g.held.delete(model);
        else if (h === undefined) g.held.set(model, { depth, since: p.clock.now() });
        else h.depth = depth;
        if (depth > 0) g.lastActivity.set(model, p.clock.now());
        if (depth > 0 && h === undefined) onFirst();
      },
    });
  }

  /** Put these versions of a model to sleep (the caller holds its lock); one that fails wakes those that slept and throws. */
  async sleepAll(g: Group, model: string, versions: readonly string[]): Promise<void> {
    const slept: string[] = [];
    try {
      for (const v of versions) {
        await this.ports.workers.sleep(model, v, g.cfg.sleepLevel);
        slept.push(v);
      }
    } catch (err) {
      for (const v of slept) await this.ports.workers.wake(model, v).catch(() => undefined);
      throw err;
    }
  }

  /** Wake a model's serving versions that sleep (the caller holds its lock); ConflictError when it has none to serve with. */
  async wakeServing(model: string): Promise<void> {
    const versions = this.servingVersions(model);
    if (versions.length === 0) throw nothingToWake(model);
    for (const v of versions) if (this.ports.workers.isAsleep(model, v)) await this.ports.workers.wake(model, v);
    for (const v of versions) await whenServing(this.ports, model, v, T.admitAfterWakeMs);
  }

  /**
   * The GPUs go from the awake model to `to`, under `to`'s lock: first, also under `from`'s (no swap
   * or rollback of it meanwhile), `from`'s requests held, those in flight finished, its versions
   * asleep; then `to`'s serving versions woken and its requests released. A failure before `to` wakes leaves `from`
   * serving (what slept wakes again); a wake of `to` that fails wakes `from` again. Either way `to` is
   * passed over for a back-off.
   */
  async switchTo(g: Group, to: string, why: string, actor: Actor, onFirst: () => void): Promise<SwitchRecord> {
    const p = this.ports;
    g.switchingTo = to;
    const from = g.awake;
    const t0 = p.clock.now();
    const rec: SwitchRecord = { at: t0, group: g.cfg.name, from, to, why, totalMs: 0, released: 0, outcome: 'done' };
    try {
      // `to`'s lock first and for the whole switch (a deploy of it loading holds it: the awake model
      // serves until that is done, rather than sleeping while nothing can wake), then `from`'s inside
      // for its part. Only a switch takes two locks, one switch a group at a time, in this order.
      await p.audited(actor, 'timeshare.switch', g.cfg.name, { from, to, why }, () =>
        p.exclusive(to, async () => {
          // nothing to wake: the GPUs stay where they are
          if (this.servingVersions(to).length === 0) throw nothingToWake(to);
          if (from !== undefined) await p.exclusive(from, () => this.putToSleep(g, from, rec, onFirst));
          const w0 = p.clock.now();
          try {
            await this.wakeServing(to);
          } catch (err) {
            // nothing left awake would serve no one: the one that slept goes back to work
            if (from !== undefined)
              await p
                .exclusive(from, () => this.wakeServing(from))
                .then(
                  () => this.giveTo(g, from),
                  () => undefined,
                );
            throw err;
          }
          rec.wakeMs = p.clock.now() - w0;
          rec.released = g.held.get(to)?.depth ?? 0;
          this.giveTo(g, to);
        }),
      );
      g.switchMs = (rec.sleepMs ?? 0) + (rec.wakeMs ?? 0);
      g.failures.delete(to);
    } catch (err) {
      rec.outcome = `failed: ${toGlidepathError(err).message}`;
      g.failed(to, p.clock.now());
    } finally {
      rec.totalMs = p.clock.now() - t0;
      g.switchingTo = undefined;
    }
    this.record(g, rec);
    return rec;
  }

  /** `from`'s part of a switch (its lock held): held, drained, asleep; a failure leaves it serving. */
  private async putToSleep(g: Group, from: string, rec: SwitchRecord, onFirst: () => void): Promise<void> {
    const p = this.ports;
    this.hold(g, from, onFirst);
    const versions = this.awakeVersions(from);
    try {
      const d0 = p.clock.now();
      await Promise.all(versions.map((v) => p.routes.drain(from, v, this.drainTimeoutMs)));
      rec.drainMs = p.clock.now() - d0;
      const s0 = p.clock.now();
      try {
        await this.sleepAll(g, from, versions);
      } finally {
        for (const v of versions) p.routes.undrain(from, v);
      }
      rec.sleepMs = p.clock.now() - s0;
    } catch (err) {
      p.routes.release(from, OWNER);
      g.held.delete(from);
      throw err;
    }
    g.awake = undefined;
    p.telemetry.scheduler.awake(g.cfg.name, from, false);
  }

  /** `model` has the GPUs from now: its requests go. */
  private giveTo(g: Group, model: string): void {
    const p = this.ports;
    g.awake = model;
    g.since = p.clock.now();
    g.held.delete(model);
    p.routes.release(model, OWNER);
    p.telemetry.scheduler.awake(g.cfg.name, model, true);
  }

  private record(g: Group, rec: SwitchRecord): void {
    const p = this.ports;
    g.history.push(rec);
    if (g.history.length > T.historyMax) g.history.splice(0, g.history.length - T.historyMax);
    const ok = rec.outcome === 'done';
    p.telemetry.scheduler.switched(g.cfg.name, rec.to, ok ? 'done' : 'failed', rec);
    const ms = (n: number | undefined) => (n === undefined ? '?' : `${Math.round(n)} ms`);
    p.emit({
      kind: ok ? 'timeshare_switch' : 'timeshare_switch_failed',
      model: rec.to,
      message:
        `time-share group ${g.cfg.name}: ${rec.from ?? 'nothing'} → ${rec.to} — ${rec.why}; ` +
        (ok
          ? `drain ${ms(rec.drainMs)}, sleep ${ms(rec.sleepMs)}, wake ${ms(rec.wakeMs)}, ${ms(rec.totalMs)} in all; ${rec.released} request(s) released`
          : `${rec.outcome}; ${g.awake ?? 'nothing'} serves, ${rec.to} is passed over until ${new Date(g.failures.get(rec.to)?.until ?? 0).toISOString()}`),
      data: rec,
    });
  }
}

function nothingToWake(model: string): ConflictError {
  return new ConflictError('time_share_turn', `${model} has no live worker of a version its route serves: nothing to wake`);
}
