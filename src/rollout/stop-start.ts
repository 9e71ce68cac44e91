// Stop-start: for a cluster with no GPU to spare, replace the active version by stopping it first —
// new requests wait in the gateway's hold queue, the old version drains, unloads and frees its GPUs,
// the new one loads on them — with the downtime measured; if the new version fails to come up, the
// old one is loaded again and serves as before (docs/rolling.md). Sees only the ports.
import { performance } from 'node:perf_hooks';
import { routeOnlyTo, routeToSpec } from '../domain/route.js';
import type { Version } from '../domain/version.js';
import { ConflictError, UnavailableError } from '../errors.js';
import type { Actor, ControllerPorts, DrainReport } from './ports.js';
import { refuseAsleep } from './bluegreen.js';

export interface StopStartResult {
  model: string;
  from: string;
  to: string;
  /** From holding new requests to releasing them onto the new version, ms: what clients waited. */
  downtime_ms: number;
  drain: { drained: number; aborted: number; elapsed_ms: number };
  freed_gpus: number;
  /** The new version's load (workers started and warmed), ms. */
  load_ms: number;
  total_ms: number;
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class StopStart {
  constructor(private readonly ports: ControllerPorts) {}

  /**
   * Replace the active version by `to`, stopping the old one first. Refused when `to` is loaded
   * already (swap it instead) or is loading; the model must have an active version.
   */
  async run(
    model: string,
    to: string,
    opts: { drainTimeoutMs?: number | undefined },
    actor: Actor,
    onProgress: (m: string) => void = () => undefined,
  ): Promise<StopStartResult> {
    const p = this.ports;
    return p.exclusive(model, () =>
      p.audited(actor, 'stop_start', model, { model, to, ...opts }, async () => {
        await refuseAsleep(p, model, 'a stop-start');
        const t0 = performance.now();
        const green = await p.versions.get(model, to);
        if (green.status === 'ready' || green.status === 'standby') {
          throw new ConflictError(
            'already_loaded',
            `version ${model}/${to} is loaded already (${green.status}): swap it in (glidepath swap --to ${to}), no stop needed`,
          );
        }
        if (green.status === 'active') throw new ConflictError('already_active', `version ${model}/${to} is already active`);
        if (green.status === 'loading') throw new ConflictError('already_loading', `version ${model}/${to} is loading`);
        const blue = await p.versions.active(model);
        if (blue === undefined)
          throw new ConflictError('no_active_version', `model ${model} has no active version to stop; deploy ${to} and swap it in instead`);
        const rollout = await p.rollouts.inProgress(model);
        if (rollout !== undefined) {
          throw new ConflictError(
            'rollout_in_progress',
            `model ${model} has a ${rollout.kind} in progress (${rollout.id}); finish or abort it before a stop-start`,
          );
        }
        const who = { actor: actor.name, reason: `stop-start to ${to}` };
        const h0 = performance.now();
        p.routes.hold(model);
        onProgress(`${model}: new requests held; draining ${blue.id}`);
        let drain: DrainReport | undefined;
        let freed = 0;
        let loadMs = 0;
        /** How far it got: what a failure leaves to undo. */
        let stage: 'draining' | 'stopped' | 'routing' = 'draining';
        try {
          drain = await p.routes.drain(model, blue.id, opts.drainTimeoutMs);
          // drained (nothing in flight) and about to unload: not left marked draining, or loading it
          // again (when V fails) could not take traffic
          p.routes.undrain(model, blue.id);
          await p.versions.transition(model, blue.id, 'standby', undefined, who);
          stage = 'stopped';
          freed = await p.workers.unload(model, blue.id);
          await p.versions.transition(model, blue.id, 'retired', undefined, who);
          onProgress(`${model}: ${blue.id} stopped (${freed} GPU(s) freed); loading ${to}`);
          const l0 = performance.now();
          await p.workers.load(green, actor, onProgress);
          loadMs = performance.now() - l0;
          stage = 'routing';
          await p.routes.publish(routeOnlyTo(routeToSpec(p.routes.current(model)), to, blue.id));
          await p.versions.promote(model, to, { actor: actor.name, reason: 'stop-start' });
        } catch (err) {
          throw await this.recover(stage, model, blue, to, err, actor, onProgress);
        } finally {
          p.routes.release(model);
        }
        // the old version out of the route: its data-plane pool goes too (the unload could not drop it then)
        await p.workers.unload(model, blue.id).catch(() => undefined);
        const downtimeMs = performance.now() - h0;
        p.emit({
          kind: 'stop_start',
          model,
          version: to,
          message: `${model}: stop-start ${blue.id} → ${to}: ${Math.round(downtimeMs)} ms of downtime (held requests released; ${drain?.aborted ?? 0} aborted by the drain)`,
          data: { from: blue.id, to, downtime_ms: downtimeMs, load_ms: loadMs },
        });
        return {
          model,
          from: blue.id,
          to,
          downtime_ms: downtimeMs,
          drain: { drained: drain?.drained ?? 0, aborted: drain?.aborted ?? 0, elapsed_ms: drain?.elapsedMs ?? 0 },
          freed_gpus: freed,
          load_ms: loadMs,
          total_ms: performance.now() - t0,
        };
      }),
    );
  }

  /**
   * A step failed with requests still held: put the old version back as far as it can be, and say
   * what state the model is in. Before anything stopped, the old version is made active again; once
   * it is stopped, it is loaded again; a new version loaded but not routed is reported as such.
   */
  private async recover(
    stage: 'draining' | 'stopped' | 'routing',
    model: string,
    blue: Version,
    to: string,
    err: unknown,
    actor: Actor,
    onProgress: (m: string) => void,
  ): Promise<Error> {
    const p = this.ports;
    const why = messageOf(err);
    const failed = (state: string) => {
      const e = new UnavailableError('stop_start_failed', `stop-start of ${model} to ${to} failed (${why}) and ${state}: the model has no version serving`, {
        retryAfterS: 30,
      });
      p.emit({ kind: 'error', model, message: e.message });
      return e;
    };
    if (stage === 'routing') return failed(`${to} is loaded but could not be routed to or promoted; route it by hand (glidepath swap --to ${to})`);
    try {
      if (stage === 'draining') {
        // nothing stopped: the old version is made active again, its route untouched
        p.routes.undrain(model, blue.id);
        if ((await p.versions.get(model, blue.id)).status !== 'active')
          await p.versions.promote(model, blue.id, { actor: actor.name, reason: `stop-start to ${to} failed` });
      } else {
        onProgress(`${model}: ${to} failed to come up (${why}); loading ${blue.id} again`);
        let old = await p.versions.get(model, blue.id);
        if (old.status === 'standby') {
          // the unload itself failed half-way: finish it, so that the load starts clean
          await p.workers.unload(model, blue.id);
          old = await p.versions.transition(model, blue.id, 'retired', undefined, { actor: actor.name, reason: `stop-start to ${to} failed` });
        }
        if (old.status !== 'ready') await p.workers.load(old, actor, onProgress);
        await p.routes.publish(routeOnlyTo(routeToSpec(p.routes.current(model)), blue.id, to));
        await p.versions.promote(model, blue.id, { actor: actor.name, reason: `stop-start to ${to} failed` });
      }
    } catch (again) {
      return failed(`${blue.id} could not be put back either (${messageOf(again)})`);
    }
    p.emit({ kind: 'stop_start', model, version: blue.id, message: `${model}: stop-start to ${to} failed (${why}); ${blue.id} is serving again` });
    const how = stage === 'draining' ? 'was never stopped' : 'was loaded again';
    return new UnavailableError('stop_start_failed', `stop-start of ${model} to ${to} failed (${why}); ${blue.id} ${how} and serves as before`, {
      retryAfterS: 1,
    });
  }
}
