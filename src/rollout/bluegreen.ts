// Blue-green: deploy green beside blue, swap (overlap or drain-first), instant rollback by one route
// swap, retire. When the versions take turns on the same GPUs (`time_shared_standby`, a time-share
// group's member), green sleeps once loaded, and a swap or rollback holds the model's requests while one
// version sleeps and the other wakes. Every operation holds the model's lock, is audited, and leaves the
// store consistent.
// Sees only the ports (src/rollout/ports.ts).
import { performance } from 'node:perf_hooks';
import type { RouteSpec } from '../domain/route.js';
import { routeToSpec } from '../domain/route.js';
import type { Version } from '../domain/version.js';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, ConflictError } from '../errors.js';
import type { Actor, ControllerPorts, DrainReport as PortDrain, WorkerInfo } from './ports.js';
import { takesTurns } from '../config/time-sharing.js';

export type SwapMode = 'overlap' | 'drain-first';
export type StandbyMode = 'warm' | 'sleep';

/** A drain as the admin API reports it (snake_case like every API answer). */
export interface DrainReport {
  drained: number;
  aborted: number;
  elapsed_ms: number;
}

function drainReport(d: PortDrain | undefined): DrainReport | undefined {
  return d && { drained: d.drained, aborted: d.aborted, elapsed_ms: d.elapsedMs };
}

export interface SwapResult {
  model: string;
  from: string | undefined;
  to: string;
  mode: SwapMode;
  /** The route switch itself (one reference swap), ms. */
  switch_ms: number;
  /** Drain-first: how long new requests were held, ms. */
  held_ms?: number | undefined;
  drain?: DrainReport | undefined;
  standby: StandbyMode;
  /** Time-shared standby: green's wake on blue's GPUs once blue slept, ms. */
  wake_ms?: number | undefined;
  total_ms: number;
}

export interface RollbackResult {
  model: string;
  rolled_back_to: string;
  rolled_back_from: string | undefined;
  /** The route switch itself, ms (target p99 < 1 ms). */
  elapsed_ms: number;
  /** Time spent waking a sleeping standby first (time-shared standby), ms. */
  wake_ms: number;
  /** On the active version's GPUs (`time_shared_standby`): how long requests were held while one slept and the other woke, ms. */
  held_ms?: number | undefined;
  drain?: DrainReport | undefined;
  total_ms: number;
  method: 'instant_route_switch' | 'wake_then_route_switch' | 'sleep_wake_route_switch';
}

/** Route that sends everything to `active` and keeps `keep` versions at weight 0 (header preview, instant rollback). */
function routeTo(current: RouteSpec, model: string, active: string, keep: readonly string[]): RouteSpec {
  const weights: Record<string, number> = { [active]: 1 };
  for (const k of keep) if (k !== active) weights[k] = 0;
  return {
    model,
    weights,
    stable: active,
    overrides: current.overrides,
    stickySalt: current.stickySalt,
    shadow: current.shadow && current.shadow.version !== active ? current.shadow : undefined,
  };
}

export interface RetireResult {
  model: string;
  version: string;
  freed_gpus: number;
  drain?: DrainReport | undefined;
}

/** The blue-green strategy over the ports; the monitor's rollback is `rollback` here. */
export class BlueGreen {
  constructor(private readonly ports: ControllerPorts) {}

  /** Versions with workers that may stay in the route at weight 0. */
  private async loadedIds(model: string): Promise<string[]> {
    return (await this.ports.versions.list(model, ['active', 'standby', 'ready'])).map((v) => v.id);
  }

  /** `deploy green`: load a version on free GPUs while blue keeps serving, warm it, mark it ready. */
  async deploy(model: string, id: string, actor: Actor, onProgress: (m: string) => void = () => undefined): Promise<Version> {
    const p = this.ports;
    return p.exclusive(model, () =>
      p.audited(actor, 'deploy_green', `${model}/${id}`, { model, version: id }, async () => {
        const v = await p.versions.get(model, id);
        if (v.status === 'ready' || v.status === 'standby' || v.status === 'active') {
          throw new ConflictError('already_loaded', `version ${model}/${id} is already loaded (${v.status})`);
        }
        if (v.status === 'loading') throw new ConflictError('already_loading', `version ${model}/${id} is loading`);
        const ready = await p.workers.load(v, actor, onProgress);
        // its GPUs are the active version's: it waits asleep for its swap (one that will not sleep is not left awake beside it)
        if (timeShared(p, model) && (await p.versions.active(model)) !== undefined)
          await p.workers.sleep(model, id, sleepLevelOf(p, model)).catch(async (err: unknown) => {
            await p.workers.unload(model, id);
            await p.versions.transition(
              model,
              id,
              'failed',
              { failure: { code: 'engine_refused', message: `it would not sleep: ${(err as Error).message}` } },
              { actor: actor.name },
            );
            throw err;
          });
        // in the route at weight 0: reachable with the version header for preview, never by weight;
        // the route in force stays as it is (a canary split keeps its traffic)
        const cur = routeToSpec(p.routes.current(model));
        const weights = { ...cur.weights };
        for (const k of await this.loadedIds(model)) weights[k] ??= 0;
        await p.routes.publish({ ...cur, weights });
        return ready;
      }),
    );
  }

  /**
   * Swap: make `to` (default: the one ready version) active. overlap: new requests go to green at
   * once, blue's in-flight finish there. drain-first: new requests wait in the gateway's hold queue
   * until blue has drained, so the two versions never serve at the same time. Blue becomes standby
   * (still loaded; asleep at level 1 with `standby: 'sleep'`).
   */
  async swap(
    model: string,
    opts: { to?: string | undefined; mode?: SwapMode; drainTimeoutMs?: number | undefined; standby?: StandbyMode },
    actor: Actor,
  ): Promise<SwapResult> {
    const p = this.ports;
    const mode = opts.mode ?? 'overlap';
    const standby = opts.standby ?? 'warm';
    return p.exclusive(model, () =>
      p.audited(actor, 'swap', model, { model, ...opts, mode }, async () => {
        await refuseDuringRolling(p, model, 'a swap');
        await refuseAsleep(p, model, 'a swap');
        const t0 = performance.now();
        const ready = await p.versions.list(model, ['ready']);
        let green: Version;
        if (opts.to !== undefined) {
          green = await p.versions.get(model, opts.to);
          if (green.status !== 'ready' && green.status !== 'standby') {
            throw new ConflictError(
              'not_ready',
              `version ${model}/${opts.to} is ${green.status}; only a ready (or standby) version can be swapped in — deploy it first`,
            );
          }
        } else {
          if (ready.length === 0)
            throw new ConflictError('no_green', `model ${model} has no ready version to swap in; run \`glidepath deploy green --version V\` first`);
          if (ready.length > 1)
            throw new BadRequestError(
              'ambiguous_green',
              `model ${model} has ${ready.length} ready versions (${ready.map((v) => v.id).join(', ')}); say which with --to`,
            );
          green = ready[0] as Version;
        }
        const blue = await p.versions.active(model);
        if (blue && blue.id === green.id) throw new ConflictError('already_active', `version ${model}/${green.id} is already active`);
        const keep = await this.loadedIds(model);
        const target = routeTo(routeToSpec(p.routes.current(model)), model, green.id, keep);
        if (blue && timeShared(p, model)) {
          const t = await this.takeTurns(model, blue.id, green.id, target, opts.drainTimeoutMs);
          await p.versions.promote(model, green.id, { actor: actor.name, reason: 'swap (time-shared standby)' });
          p.emit({
            kind: 'swap',
            model,
            version: green.id,
            message: `${model}: swapped ${blue.id} → ${green.id} on the same GPUs (${blue.id} asleep, ${green.id} woken in ${t.wakeMs.toFixed(0)} ms; requests held ${t.heldMs.toFixed(0)} ms)`,
          });
          const { switchMs, heldMs, wakeMs, drain } = t;
          return {
            model,
            from: blue.id,
            to: green.id,
            mode: 'drain-first',
            switch_ms: switchMs,
            held_ms: heldMs,
            drain: drainReport(drain),
            standby: 'sleep',
            wake_ms: wakeMs,
            total_ms: performance.now() - t0,
          };
        }
        // awake from now on, and across restarts: the new active version never goes back to sleep
        await p.workers.wake(model, green.id);
        let switchMs: number;
        let heldMs: number | undefined;
        let drain: PortDrain | undefined;
        if (mode === 'drain-first' && blue) {
          const h0 = performance.now();
          p.routes.hold(model);
          try {
            switchMs = (await p.routes.publish(target)).switchMs;
            drain = await p.routes.drain(model, blue.id, opts.drainTimeoutMs);
            p.routes.undrain(model, blue.id);
          } finally {
            p.routes.release(model);
          }
          heldMs = performance.now() - h0;
        } else {
          switchMs = (await p.routes.publish(target)).switchMs;
        }
        await p.versions.promote(model, green.id, { actor: actor.name, reason: `swap (${mode})` });
        if (blue && standby === 'sleep') await p.workers.sleep(model, blue.id, 1);
        p.emit({
          kind: 'swap',
          model,
          version: green.id,
          message: `${model}: swapped ${blue?.id ?? '(none)'} → ${green.id} (${mode}) in ${switchMs.toFixed(3)} ms`,
        });
        return {
          model,
          from: blue?.id,
          to: green.id,
          mode,
          switch_ms: switchMs,
          held_ms: heldMs,
          drain: drainReport(drain),
          standby,
          total_ms: performance.now() - t0,
        };
      }),
    );
  }

  /**
   * Instant rollback: route back to the standby version by one snapshot swap. A sleeping standby
   * (time-shared) is woken first and the longer time is reported honestly.
   */
  async rollback(model: string, actor: Actor, reason?: string): Promise<RollbackResult> {
    const p = this.ports;
    return p.exclusive(model, () =>
      p.audited(actor, 'rollback', model, { model, reason }, async () => {
        await refuseDuringRolling(p, model, 'an instant rollback');
        await refuseAsleep(p, model, 'a rollback');
        const t0 = performance.now();
        const target = await p.versions.standby(model);
        if (!target) {
          // let the registry produce its precise error (which standbys exist and why they are blocked)
          await p.versions.rollback(model, { actor: actor.name });
          throw new ConflictError('no_standby', `model ${model} has no standby version to roll back to`);
        }
        const cur = await p.versions.active(model);
        const back = routeTo(routeToSpec(p.routes.current(model)), model, target.id, await this.loadedIds(model));
        if (cur && timeShared(p, model)) {
          const t = await this.takeTurns(model, cur.id, target.id, back, undefined);
          await p.versions.rollback(model, { actor: actor.name, reason: reason ?? 'rollback' });
          const res: RollbackResult = {
            model,
            rolled_back_to: target.id,
            rolled_back_from: cur.id,
            elapsed_ms: t.switchMs,
            wake_ms: t.wakeMs,
            held_ms: t.heldMs,
            drain: drainReport(t.drain),
            total_ms: performance.now() - t0,
            method: 'sleep_wake_route_switch',
          };
          p.emit({
            kind: 'rollback',
            model,
            version: target.id,
            message: `${model}: rolled back to ${target.id} on the same GPUs (${cur.id} asleep, ${target.id} woken in ${t.wakeMs.toFixed(0)} ms; requests held ${t.heldMs.toFixed(0)} ms)`,
            data: res,
          });
          return res;
        }
        let wakeMs = 0;
        if (p.workers.isAsleep(model, target.id)) {
          const w0 = performance.now();
          await p.workers.wake(model, target.id);
          wakeMs = performance.now() - w0;
        }
        const { switchMs } = await p.routes.publish(back);
        await p.versions.rollback(model, { actor: actor.name, reason: reason ?? 'rollback' });
        const res: RollbackResult = {
          model,
          rolled_back_to: target.id,
          rolled_back_from: cur?.id,
          elapsed_ms: switchMs,
          wake_ms: wakeMs,
          total_ms: performance.now() - t0,
          method: wakeMs > 0 ? 'wake_then_route_switch' : 'instant_route_switch',
        };
        p.emit({
          kind: 'rollback',
          model,
          version: target.id,
          message: `${model}: rolled back to ${target.id} in ${switchMs.toFixed(3)} ms${wakeMs > 0 ? ` (+${wakeMs.toFixed(0)} ms wake)` : ''}`,
          data: res,
        });
        return res;
      }),
    );
  }

  /**
   * Versions on the same GPUs (`time_shared_standby`): the model's requests are held, `from`'s in flight
   * finish, it sleeps, `to` wakes, the route goes to it, the requests go. A wake that fails wakes
   * `from` again (the route never left it) before the error is thrown.
   */
  private async takeTurns(
    model: string,
    from: string,
    to: string,
    route: RouteSpec,
    drainTimeoutMs: number | undefined,
  ): Promise<{ switchMs: number; heldMs: number; wakeMs: number; drain: PortDrain }> {
    const p = this.ports;
    // nothing to wake (its workers died asleep): the active version keeps serving
    if (p.workers.list(model, to).length === 0)
      throw new ConflictError('no_serving_worker', `${model}/${to} has no live worker to wake on ${from}'s GPUs; ${from} keeps serving (redeploy ${to})`);
    const level = sleepLevelOf(p, model);
    const h0 = performance.now();
    p.routes.hold(model);
    try {
      const drain = await p.routes.drain(model, from, drainTimeoutMs);
      try {
        await p.workers.sleep(model, from, level);
      } finally {
        p.routes.undrain(model, from);
      }
      const w0 = performance.now();
      let wakeMs = 0;
      let switchMs: number;
      try {
        await p.workers.wake(model, to);
        wakeMs = performance.now() - w0;
        await whenServing(p, model, to, DEFAULTS.timeShare.admitAfterWakeMs);
        ({ switchMs } = await p.routes.publish(route));
      } catch (err) {
        // the route never left `from`: it serves again
        await p.workers.sleep(model, to, level).catch(() => undefined);
        await p.workers.wake(model, from);
        throw err;
      }
      return { switchMs, heldMs: performance.now() - h0, wakeMs, drain };
    } finally {
      p.routes.release(model);
    }
  }

  /** Retire: unload a version and free its GPUs; never the active one; standby only when forced. */
  async retire(model: string, id: string, opts: { force?: boolean }, actor: Actor): Promise<RetireResult> {
    const p = this.ports;
    return p.exclusive(model, () =>
      p.audited(actor, 'retire', `${model}/${id}`, { model, version: id, ...opts }, async () => {
        const v = await p.versions.get(model, id);
        if (v.status === 'active') throw new ConflictError('retire_active', `version ${model}/${id} is active; swap or roll back to another version first`);
        if (v.status === 'retired') throw new ConflictError('already_retired', `version ${model}/${id} is already retired`);
        if (v.status === 'standby' && !opts.force) {
          throw new ConflictError('retire_standby', `version ${model}/${id} is the standby (rollback target); pass --force to retire it anyway`);
        }
        if (v.status === 'loading') throw new ConflictError('retire_loading', `version ${model}/${id} is loading; wait for it to finish or fail`);
        let drain: PortDrain | undefined;
        const route = p.routes.current(model);
        if (route.versions.some((x) => x.id === id) || Object.values(route.overrides).includes(id) || route.shadow?.version === id) {
          const spec = routeToSpec(route);
          const weights = { ...spec.weights };
          if ((weights[id] ?? 0) > 0)
            throw new ConflictError('retire_serving', `version ${model}/${id} still has weight ${weights[id]}; move its traffic first`);
          delete weights[id];
          const overrides = Object.fromEntries(Object.entries(spec.overrides ?? {}).filter(([, vid]) => vid !== id));
          await p.routes.publish({ ...spec, weights, overrides, shadow: spec.shadow?.version === id ? undefined : spec.shadow });
        }
        try {
          drain = await p.routes.drain(model, id);
        } catch {
          // the data plane may not know it (never loaded)
        }
        const freedGpus = await p.workers.unload(model, id);
        await p.versions.transition(model, id, 'retired', { gpus: [] }, { actor: actor.name, reason: 'retired' });
        p.emit({ kind: 'retire', model, version: id, message: `${model}/${id} retired, freed ${freedGpus} GPU(s)` });
        return { model, version: id, freed_gpus: freedGpus, drain: drainReport(drain) };
      }),
    );
  }
}

/** The level its versions sleep at when they take turns: its group's, else 1 (weights kept in CPU memory). */
function sleepLevelOf(p: ControllerPorts, model: string): 1 | 2 {
  return p.models.timeShared().find((g) => g.models.includes(model))?.sleepLevel ?? 1;
}

/** Whether a model's versions take turns on the same GPUs (`time_shared_standby`, or a time-share group's member). */
function timeShared(p: ControllerPorts, model: string): boolean {
  return takesTurns(p.models.config(model), p.models.timeShared());
}

/**
 * A model asleep in a time-share group: what would wake or serve it (a swap, a rollback, a stop-start)
 * would do so beside the model that has the GPUs. It gets them first. (A rollout of a member is
 * refused whether it sleeps or not: refuseTimeSharedStandby.)
 */
export async function refuseAsleep(p: ControllerPorts, model: string, what: string): Promise<void> {
  const g = p.models.timeShared().find((x) => x.models.includes(model));
  if (g === undefined) return;
  const active = await p.versions.active(model);
  if (active !== undefined && p.workers.isAsleep(model, active.id))
    throw new ConflictError(
      'time_shared_asleep',
      `model ${model} sleeps on the GPUs it time-shares (group ${g.name}): ${what} would wake it beside the model that has them; give it the GPUs first (glidepath scheduler turn ${g.name} ${model}) or wait for its turn`,
    );
}

/**
 * A canary, an experiment or a rolling update serves two versions at once: not on GPUs where only one
 * can be awake.
 */
export function refuseTimeSharedStandby(p: ControllerPorts, model: string, what: string): void {
  if (timeShared(p, model))
    throw new ConflictError(
      'time_shared_standby',
      `model ${model}'s versions take turns on the same GPUs (${p.models.config(model).timeSharedStandby === true ? 'time_shared_standby' : 'a time-share group'}): ${what} would serve two versions at once there; deploy green and swap instead`,
    );
}

/**
 * A rolling update routes between its two pools at every step: a swap or rollback under it would be
 * undone by its next step. It is aborted (back to the old pool) or finished first.
 */
async function refuseDuringRolling(p: ControllerPorts, model: string, what: string): Promise<void> {
  const r = await p.rollouts.inProgress(model);
  if (r?.kind === 'rolling') {
    throw new ConflictError(
      'rollout_in_progress',
      `model ${model} has a rolling update in progress (${r.id}): ${what} would fight its route; abort it (glidepath rollout abort) or let it finish`,
    );
  }
}

/** A worker that takes requests once awake: serving, and judged fit (or not judged: health off). */
function serves(w: WorkerInfo): boolean {
  const s = w.health?.state;
  return w.role === 'serving' && (s === undefined || s === 'healthy' || s === 'suspicious' || s === 'unhealthy');
}

/**
 * After a wake: resolves once a worker of `version` takes requests, or after `limitMs`. A worker
 * started while its version slept (a replacement) was never admitted by its probes; they run once it
 * is awake, and the requests held for it wait for that instead of finding no worker.
 */
export function whenServing(p: ControllerPorts, model: string, version: string, limitMs: number): Promise<void> {
  if (p.workers.list(model, version).some(serves)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      off();
      cancel();
      resolve();
    };
    const off = p.workers.onHealth((w) => {
      if (w.model === model && w.version === version && p.workers.list(model, version).some(serves)) done();
    });
    const cancel = p.clock.after(limitMs, done);
  });
}
