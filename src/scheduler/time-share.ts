// Time-shared GPUs (docs/multi-model.md#temporal-sharing): per group, one model awake on the slots
// and the others asleep, their requests held in the gateway's bounded queue. When time-share-plan.ts
// says so (or an operator asks), a switch (time-share-switch.ts): the awake model's new requests held
// and its requests in flight finished, it sleeps, the next one wakes and its requests are released.
// A switch that fails is not tried again for that model before a back-off. Every switch measured,
// explained, audited and emitted; whose turn it is survives a restart.
import type { TimeShareConfig } from '../config/types.js';
import { switchEstimateMs } from '../config/time-sharing.js';
import { ConflictError, NotFoundError, toGlidepathError } from '../errors.js';
import { ReconcileLoop } from '../rollout/loop.js';
import type { Actor, ControllerPorts } from '../rollout/ports.js';
import { decideTurn } from './time-share-plan.js';
import type { Turn, WaitingModel } from './time-share-plan.js';
import { Group, SWITCH_ACTOR, Switcher } from './time-share-switch.js';
import type { SwitchRecord } from './time-share-switch.js';

export type { SwitchRecord };

export interface GroupStatus {
  group: string;
  models: readonly string[];
  awake: string | undefined;
  since: number;
  switching: boolean;
  /** Requests held per sleeping model, and since when the oldest waits. */
  waiting: { model: string; held: number; since: number }[];
  /** Models whose last switch failed, and until when no other is tried. */
  backingOff: { model: string; until: number; failures: number }[];
  /** What the last look decided. */
  decision: Turn | undefined;
  /** What the next switch is expected to take (ms): its sleep and wake, the last measured; before any, the estimate from the models' sizes. */
  switchMs: number;
  /** GPUs the members would need more to be resident side by side. */
  gpusSaved: number;
  history: SwitchRecord[];
}

export class TimeShare {
  private readonly groups = new Map<string, Group>();
  /** model → its group. */
  private readonly memberOf = new Map<string, Group>();
  private readonly loop: ReconcileLoop;
  private readonly switcher: Switcher;
  private unsubs: (() => void)[] = [];

  constructor(
    private readonly ports: ControllerPorts,
    /** How long a switch waits for the awake model's requests to finish (as long as one may last: none is cut). */
    drainTimeoutMs: number,
    tickMs: number,
  ) {
    for (const cfg of ports.models.timeShared()) {
      const g = new Group(cfg, switchEstimateMs(cfg));
      this.groups.set(cfg.name, g);
      for (const m of cfg.models) this.memberOf.set(m, g);
    }
    this.switcher = new Switcher(ports, drainTimeoutMs);
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
      // a version loaded for a model that is not getting the GPUs (a deploy while it sleeps) sleeps
      // before it is ready. The loader holds the model's lock (a deploy, a stop-start, a canary): the
      // sleep takes no lock here
      p.workers.onLoaded(async (v) => {
        const g = this.memberOf.get(v.model);
        if (g !== undefined && (g.switching ? g.switchingTo : g.awake) !== v.model) await p.workers.sleep(v.model, v.id, g.cfg.sleepLevel);
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
      backingOff: [...g.failures.entries()].map(([model, f]) => ({ model, until: f.until, failures: f.n })),
      decision: g.decision,
      switchMs: g.switchMs,
      gpusSaved: g.cfg.slots * g.cfg.tp * (g.cfg.models.length - 1),
      history: [...g.history],
    }));
  }

  /**
   * An operator gives a member the group's GPUs now (before a swap or a rollback of it, say), whatever
   * the turn and any back-off. Resolves with the switch; ConflictError `time_share_turn` while the
   * group switches or for a model not in it.
   */
  async turn(group: string, model: string, actor: Actor): Promise<SwitchRecord | undefined> {
    const g = this.groups.get(group);
    if (g === undefined)
      throw new NotFoundError(
        'time_share_group_not_found',
        `no time-share group ${JSON.stringify(group)} (groups: ${[...this.groups.keys()].join(', ') || 'none'})`,
      );
    if (!g.cfg.models.includes(model))
      throw new ConflictError('time_share_turn', `model ${JSON.stringify(model)} is not in time-share group ${group} (${g.cfg.models.join(', ')})`);
    if (g.switching) throw new ConflictError('time_share_turn', `time-share group ${group} is switching to ${g.switchingTo ?? '?'}; ask again once it is done`);
    if (g.awake === model) return undefined;
    g.failures.delete(model);
    return this.switchTo(g, model, `asked by ${actor.name}`, actor);
  }

  /** The state after a restart (or the first start): one member awake, the rest asleep and held. */
  private async settle(g: Group): Promise<void> {
    const p = this.ports;
    const s = this.switcher;
    const awakeNow = g.cfg.models.filter((m) => s.awakeVersions(m).length > 0);
    const saved = await this.savedAwake(g);
    const want = saved ?? awakeNow[0] ?? g.cfg.models[0];
    if (want === undefined) return; // a group has two members at least (config)
    for (const m of g.cfg.models) if (m !== want) s.hold(g, m, () => this.look(g));
    for (const m of awakeNow) {
      if (m === want) continue;
      await p
        .exclusive(m, () => s.sleepAll(g, m, s.awakeVersions(m)))
        .catch((err: unknown) =>
          p.emit({
            kind: 'timeshare_error',
            model: m,
            message: `time-share group ${g.cfg.name}: ${m} would not sleep at start (${toGlidepathError(err).message}); it stays awake beside ${want}`,
          }),
        );
    }
    try {
      if (!awakeNow.includes(want)) await p.exclusive(want, () => s.wakeServing(want));
      g.awake = want;
      g.since = p.clock.now();
      await this.save(g);
    } catch (err) {
      // nothing serves: its requests wait too, and a look tries again after a back-off
      s.hold(g, want, () => this.look(g));
      g.failed(want, p.clock.now());
      p.emit({
        kind: 'timeshare_error',
        model: want,
        message: `time-share group ${g.cfg.name}: ${want} did not wake at start: ${toGlidepathError(err).message}`,
      });
    }
    for (const m of g.cfg.models) p.telemetry.scheduler.awake(g.cfg.name, m, m === g.awake);
    p.emit({
      kind: 'timeshare_settled',
      message: `time-share group ${g.cfg.name}: ${g.awake ?? 'nothing'} awake; ${g.cfg.models.filter((m) => m !== g.awake).join(', ')} asleep`,
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
    const now = p.clock.now();
    // a model whose last switch failed waits out its back-off
    const backOff = [...g.failures.values()].filter((f) => f.until > now).map((f) => f.until);
    const waiting: WaitingModel[] = [...g.held.entries()]
      .filter(([model]) => model !== g.awake && !((g.failures.get(model)?.until ?? 0) > now))
      .map(([model, h]) => ({ model, priority: p.models.config(model).priority, held: h.depth, heldSince: h.since }));
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
    // an operator's turn started meanwhile: looked at again once it is done
    if (g.switching) return;
    const turn = decideTurn(now, awake, waiting, { minActiveMs: g.cfg.minActiveMs, idleMs: g.cfg.idleMs, maxWaitMs: g.cfg.maxWaitMs, switchMs: g.switchMs });
    g.decision = turn;
    g.cancelTimer?.();
    g.cancelTimer = undefined;
    if (turn.kind === 'switch') {
      await this.switchTo(g, turn.to, turn.why, SWITCH_ACTOR);
      return;
    }
    // busy without an end in sight: looked at again as its requests end, and at each tick
    const at = Math.min(turn.kind === 'wait' ? turn.at : Number.POSITIVE_INFINITY, ...backOff);
    if (Number.isFinite(at)) g.cancelTimer = p.clock.after(Math.max(0, at - now), () => this.look(g));
  }

  private async switchTo(g: Group, to: string, why: string, actor: Actor): Promise<SwitchRecord> {
    const rec = await this.switcher.switchTo(g, to, why, actor, () => this.look(g));
    if (rec.outcome === 'done') await this.save(g);
    // requests that came meanwhile (the one that slept has its own now) are looked at again
    if (g.held.size > 0) this.look(g);
    return rec;
  }

  private async savedAwake(g: Group): Promise<string | undefined> {
    const raw: unknown = await this.ports.settings.get(key(g.cfg));
    const awake = raw !== null && typeof raw === 'object' ? (raw as { awake?: unknown }).awake : undefined;
    return typeof awake === 'string' && g.cfg.models.includes(awake) ? awake : undefined;
  }

  private save(g: Group): Promise<void> {
    return this.ports.settings.set(key(g.cfg), g.awake === undefined ? {} : { awake: g.awake });
  }
}

function key(g: Pick<TimeShareConfig, 'name'>): string {
  return `timeshare.${g.name}`;
}

/**
 * The member a group's boot leaves awake: the one awake before a restart, else the first listed.
 * The boot loads it last and puts each other member to sleep as soon as it is loaded: on a real GPU
 * two engines awake at once would not fit.
 */
export async function awakeAtBoot(cfg: TimeShareConfig, getSetting: (key: string) => Promise<unknown>): Promise<string> {
  const raw = await getSetting(key(cfg));
  const awake = raw !== null && typeof raw === 'object' ? (raw as { awake?: unknown }).awake : undefined;
  return typeof awake === 'string' && cfg.models.includes(awake) ? awake : (cfg.models[0] as string);
}
