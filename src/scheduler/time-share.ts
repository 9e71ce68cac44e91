// Time-shared GPUs (docs/multi-model.md#temporal-sharing): per group, one model awake on the slots
// and the others asleep, their requests held in the gateway's bounded queue. When time-share-plan.ts
// says so, a switch: the awake model's new requests held and its requests in flight finished, it
// sleeps, the next one wakes and its requests are released. Every switch measured (drain, sleep,
// wake), explained, audited and emitted; whose turn it is survives a restart.
import type { TimeShareConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { toGlidepathError } from '../errors.js';
import { ReconcileLoop } from '../rollout/loop.js';
import type { Actor, ControllerPorts } from '../rollout/ports.js';
import { decideTurn } from './time-share-plan.js';
import type { Turn, WaitingModel } from './time-share-plan.js';

const ACTOR: Actor = { name: 'time-share' };

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

export interface GroupStatus {
  group: string;
  models: readonly string[];
  awake: string | undefined;
  since: number;
  switching: boolean;
  /** Requests held per sleeping model, and since when the oldest waits. */
  waiting: { model: string; held: number; since: number }[];
  /** What the last look decided. */
  decision: Turn | undefined;
  /** What the next switch is expected to take (ms): the last one measured, before any the estimate from the models' sizes. */
  switchMs: number;
  /** GPUs the members would need more to be resident side by side. */
  gpusSaved: number;
  history: SwitchRecord[];
}

/** Persisted per group: who is awake, and the versions each sleeping member had awake when its turn ended. */
interface Saved {
  awake?: string;
  slept?: Record<string, string[]>;
}

class Group {
  awake: string | undefined;
  since = 0;
  switching = false;
  looking = false;
  lookAgain = false;
  /** model → requests held and when the first of them arrived. */
  readonly held = new Map<string, { depth: number; since: number }>();
  readonly lastActivity = new Map<string, number>();
  /** model → the versions its turn's end put to sleep (woken at its next turn; a standby asleep before stays so). */
  slept: Record<string, string[]> = {};
  decision: Turn | undefined;
  switchMs: number;
  cancelTimer: (() => void) | undefined;
  readonly history: SwitchRecord[] = [];
  constructor(
    readonly cfg: TimeShareConfig,
    switchMs: number,
  ) {
    this.switchMs = switchMs;
  }
}

export class TimeShare {
  private readonly groups = new Map<string, Group>();
  /** model → its group. */
  private readonly memberOf = new Map<string, Group>();
  private readonly loop: ReconcileLoop;
  private unsubs: (() => void)[] = [];

  constructor(
    private readonly ports: ControllerPorts,
    /** How long a switch waits for the awake model's requests to finish (as long as one may last: none is cut). */
    private readonly drainTimeoutMs: number,
    tickMs: number,
  ) {
    for (const cfg of ports.models.timeShared()) {
      const g = new Group(cfg, this.estimateMs(cfg));
      this.groups.set(cfg.name, g);
      for (const m of cfg.models) this.memberOf.set(m, g);
    }
    // a group is looked at when a request waits or ends and when a turn's time comes; the tick is the net under them
    this.loop = new ReconcileLoop(
      ports.clock,
      tickMs,
      () => {
        for (const g of this.groups.values()) if (g.held.size > 0) this.look(g);
      },
      (what, err) => ports.emit({ kind: 'timeshare_error', message: `time-share ${what}: ${toGlidepathError(err).message}` }),
    );
  }

  /** Nothing measured yet: a wake of the largest member's weights from CPU memory (level 1) or storage (2). */
  private estimateMs(cfg: TimeShareConfig): number {
    const gb = cfg.memoryGbPerGpu * cfg.tp;
    const rate = cfg.sleepLevel === 1 ? DEFAULTS.control.planWakeGbPerS : DEFAULTS.control.planLoadGbPerS;
    return (gb / rate) * 1000;
  }

  /** Whether a model takes turns on shared GPUs (the multi-model scheduler leaves its replicas alone). */
  isTimeShared(model: string): boolean {
    return this.memberOf.has(model);
  }

  /**
   * Put each group in order: its awake member the one saved (else the first awake, else the first
   * listed), every other asleep with its requests held; then watch requests.
   */
  async run(): Promise<void> {
    if (this.groups.size === 0 || this.loop.started) return;
    this.loop.start();
    const p = this.ports;
    this.unsubs.push(
      p.telemetry.subscribe((r) => {
        const g = this.memberOf.get(r.model);
        if (g === undefined || r.shadow) return;
        g.lastActivity.set(r.model, p.clock.now());
        if (g.held.size > 0) this.look(g);
      }),
      // a version loaded for a model whose turn is over (a deploy while it sleeps) sleeps before it is ready
      p.workers.onLoaded(async (v) => {
        const g = this.memberOf.get(v.model);
        if (g !== undefined && g.awake !== v.model && !g.switching) await this.sleepLoaded(g, v.model, v.id);
      }),
    );
    for (const g of this.groups.values()) await this.settle(g);
  }

  shutdown(): void {
    this.loop.stop();
    for (const u of this.unsubs) u();
    this.unsubs = [];
    for (const g of this.groups.values()) g.cancelTimer?.();
  }

  whenIdle(): Promise<void> {
    return this.loop.whenIdle();
  }

  status(): GroupStatus[] {
    return [...this.groups.values()].map((g) => ({
      group: g.cfg.name,
      models: g.cfg.models,
      awake: g.awake,
      since: g.since,
      switching: g.switching,
      waiting: [...g.held.entries()].map(([model, h]) => ({ model, held: h.depth, since: h.since })),
      decision: g.decision,
      switchMs: g.switchMs,
      gpusSaved: g.cfg.slots * g.cfg.tp * (g.cfg.models.length - 1),
      history: [...g.history],
    }));
  }

  /** The state after a restart (or the first start): one member awake, the rest asleep and held. */
  private async settle(g: Group): Promise<void> {
    const p = this.ports;
    const saved = await this.saved(g);
    g.slept = saved.slept ?? {};
    const awakeNow = g.cfg.models.filter((m) => this.awakeVersions(m).length > 0);
    const want = (saved.awake !== undefined && g.cfg.models.includes(saved.awake) ? saved.awake : undefined) ?? awakeNow[0] ?? g.cfg.models[0];
    for (const m of awakeNow) if (m !== want) await this.sleepModel(g, m);
    for (const m of g.cfg.models) if (m !== want) this.holdModel(g, m);
    if (want !== undefined && !awakeNow.includes(want)) await this.wakeModel(g, want);
    g.awake = want;
    g.since = p.clock.now();
    await this.save(g);
    for (const m of g.cfg.models) p.telemetry.scheduler.awake(g.cfg.name, m, m === want);
    p.emit({
      kind: 'timeshare_settled',
      message: `time-share group ${g.cfg.name}: ${want ?? 'nothing'} awake; ${g.cfg.models.filter((m) => m !== want).join(', ')} asleep`,
    });
  }

  /** The versions of a model with workers awake. */
  private awakeVersions(model: string): string[] {
    const versions = new Set(this.ports.workers.list(model).map((w) => w.version));
    return [...versions].filter((v) => !this.ports.workers.isAsleep(model, v)).sort();
  }

  /** Hold a sleeping member's requests, watching how many wait. */
  private holdModel(g: Group, model: string): void {
    const p = this.ports;
    p.routes.hold(model, {
      max: g.cfg.maxHeld,
      timeoutMs: g.cfg.maxWaitMs,
      why: `is asleep on the GPUs it time-shares (group ${g.cfg.name}) until its turn`,
      onDepth: (depth) => {
        const h = g.held.get(model);
        if (depth === 0) g.held.delete(model);
        else if (h === undefined) g.held.set(model, { depth, since: p.clock.now() });
        else h.depth = depth;
        if (depth > 0) g.lastActivity.set(model, p.clock.now());
        if (depth > 0 && h === undefined) this.look(g);
      },
    });
  }

  /** Decide now, and act or set the timer for the next look (one look at a time: one asked meanwhile follows it). */
  private look(g: Group): void {
    if (!this.loop.started) return;
    if (g.looking || g.switching) {
      g.lookAgain = true;
      return;
    }
    g.looking = true;
    g.lookAgain = false;
    this.loop.spawn(
      this.decide(g).finally(() => {
        g.looking = false;
        if (g.lookAgain && !g.switching) this.look(g);
      }),
      `a look at time-share group ${g.cfg.name}`,
    );
  }

  private async decide(g: Group): Promise<void> {
    const p = this.ports;
    const waiting: WaitingModel[] = [...g.held.entries()].map(([model, h]) => ({
      model,
      priority: p.models.config(model).priority,
      held: h.depth,
      heldSince: h.since,
    }));
    const awake =
      g.awake === undefined
        ? undefined
        : {
            model: g.awake,
            priority: p.models.config(g.awake).priority,
            since: g.since,
            inflight: p.routes.inflight(g.awake),
            lastActivityAt: Math.max(g.lastActivity.get(g.awake) ?? g.since, g.since),
            rollout: (await p.rollouts.inProgress(g.awake))?.id,
          };
    const now = p.clock.now();
    const turn = decideTurn(now, awake, waiting, { minActiveMs: g.cfg.minActiveMs, idleMs: g.cfg.idleMs, maxWaitMs: g.cfg.maxWaitMs, switchMs: g.switchMs });
    g.decision = turn;
    g.cancelTimer?.();
    g.cancelTimer = undefined;
    if (turn.kind === 'switch') await this.switchTo(g, turn.to, turn.why);
    // busy without an end in sight: looked at again as its requests end, and at each tick
    else if (turn.kind === 'wait' && Number.isFinite(turn.at)) g.cancelTimer = p.clock.after(Math.max(0, turn.at - now), () => this.look(g));
  }

  /**
   * The GPUs go from the awake model to `to`: the awake one's new requests are held and those in
   * flight finish, it sleeps, `to` wakes and its held requests go. A wake that fails puts the one
   * that slept back to work.
   */
  private async switchTo(g: Group, to: string, why: string): Promise<void> {
    const p = this.ports;
    g.switching = true;
    const from = g.awake;
    const t0 = p.clock.now();
    const rec: SwitchRecord = { at: t0, group: g.cfg.name, from, to, why, totalMs: 0, released: 0, outcome: 'done' };
    try {
      await p.audited(ACTOR, 'timeshare.switch', g.cfg.name, { from, to, why }, async () => {
        if (from !== undefined) {
          this.holdModel(g, from);
          const versions = this.awakeVersions(from);
          const d0 = p.clock.now();
          await Promise.all(versions.map((v) => p.routes.drain(from, v, this.drainTimeoutMs)));
          rec.drainMs = p.clock.now() - d0;
          const s0 = p.clock.now();
          try {
            await this.sleepModel(g, from, versions);
          } finally {
            for (const v of versions) p.routes.undrain(from, v);
          }
          rec.sleepMs = p.clock.now() - s0;
          g.awake = undefined;
          p.telemetry.scheduler.awake(g.cfg.name, from, false);
        }
        const w0 = p.clock.now();
        try {
          await this.wakeModel(g, to);
        } catch (err) {
          // nothing left awake would serve no one: the one that slept goes back to work
          if (from !== undefined)
            await this.wakeModel(g, from).then(
              () => this.giveTo(g, from),
              () => undefined,
            );
          throw err;
        }
        rec.wakeMs = p.clock.now() - w0;
        rec.released = g.held.get(to)?.depth ?? 0;
        this.giveTo(g, to);
        await this.save(g);
      });
      rec.totalMs = p.clock.now() - t0;
      g.switchMs = rec.totalMs;
    } catch (err) {
      rec.outcome = `failed: ${toGlidepathError(err).message}`;
      rec.totalMs = p.clock.now() - t0;
    } finally {
      g.switching = false;
    }
    this.record(g, rec);
    // requests that came meanwhile (the one that slept has its own now) are looked at again
    if (g.held.size > 0) this.look(g);
  }

  /** `model` has the GPUs from now: its requests go. */
  private giveTo(g: Group, model: string): void {
    const p = this.ports;
    g.awake = model;
    g.since = p.clock.now();
    g.held.delete(model);
    p.routes.release(model);
    p.telemetry.scheduler.awake(g.cfg.name, model, true);
  }

  /** Put a model's awake versions to sleep at the group's level, remembered for its next turn. */
  private async sleepModel(g: Group, model: string, versions = this.awakeVersions(model)): Promise<void> {
    await this.ports.exclusive(model, async () => {
      for (const v of versions) await this.ports.workers.sleep(model, v, g.cfg.sleepLevel);
    });
    g.slept[model] = [...new Set([...(g.slept[model] ?? []), ...versions])];
  }

  /** Wake the versions a model's last turn put to sleep (a standby asleep before stays asleep). */
  private async wakeModel(g: Group, model: string): Promise<void> {
    const p = this.ports;
    const loaded = new Set(p.workers.list(model).map((w) => w.version));
    const versions = (g.slept[model] ?? []).filter((v) => loaded.has(v));
    // nothing recorded (its first turn, or the record lost): the active version
    if (versions.length === 0) {
      const active = await p.versions.active(model);
      if (active !== undefined && loaded.has(active.id)) versions.push(active.id);
    }
    await p.exclusive(model, async () => {
      for (const v of versions) if (p.workers.isAsleep(model, v)) await p.workers.wake(model, v);
    });
    delete g.slept[model];
  }

  /** A version loaded while its model sleeps joins its sleep. */
  private async sleepLoaded(g: Group, model: string, version: string): Promise<void> {
    if (g.awake === model || this.ports.workers.isAsleep(model, version)) return;
    await this.sleepModel(g, model, [version]);
    await this.save(g);
  }

  private record(g: Group, rec: SwitchRecord): void {
    const p = this.ports;
    g.history.push(rec);
    if (g.history.length > DEFAULTS.timeShare.historyMax) g.history.splice(0, g.history.length - DEFAULTS.timeShare.historyMax);
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
          : rec.outcome),
      data: rec,
    });
  }

  private async saved(g: Group): Promise<Saved> {
    const raw: unknown = await this.ports.settings.get(key(g));
    if (raw === undefined || raw === null || typeof raw !== 'object') return {};
    const { awake, slept } = raw as { awake?: unknown; slept?: unknown };
    const out: Saved = {};
    if (typeof awake === 'string') out.awake = awake;
    if (slept !== null && typeof slept === 'object') {
      out.slept = {};
      for (const [m, vs] of Object.entries(slept as Record<string, unknown>))
        if (Array.isArray(vs)) out.slept[m] = vs.filter((v): v is string => typeof v === 'string');
    }
    return out;
  }

  private save(g: Group): Promise<void> {
    const s: Saved = { slept: g.slept };
    if (g.awake !== undefined) s.awake = g.awake;
    return this.ports.settings.set(key(g), s);
  }
}

function key(g: { cfg: Pick<TimeShareConfig, 'name'> }): string {
  return `timeshare.${g.cfg.name}`;
}

/**
 * The member a group's boot leaves awake: the one awake before a restart, else the first listed.
 * The boot loads it last and puts each other member to sleep as soon as it is loaded: on a real GPU
 * two engines awake at once would not fit.
 */
export async function awakeAtBoot(cfg: TimeShareConfig, getSetting: (key: string) => Promise<unknown>): Promise<string> {
  const raw = await getSetting(key({ cfg }));
  const awake = raw !== null && typeof raw === 'object' ? (raw as { awake?: unknown }).awake : undefined;
  return typeof awake === 'string' && cfg.models.includes(awake) ? awake : (cfg.models[0] as string);
}
