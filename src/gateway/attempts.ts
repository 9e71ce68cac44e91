// The workers one proxied request goes through: the one it holds now (counted in that worker's
// outstanding requests, which the picker balances on; in disaggregated serving its prefill worker
// too, until the decode worker pulled the blocks), the ones it already tried, and how many attempts
// it made.
import { UnavailableError, toGlidepathError } from '../errors.js';
import type { GlidepathError } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { AdapterPicker, RandomAdapterPicker } from './adapters.js';
import type { AdapterLoader, AdapterSpec } from './adapters.js';
import { eligible } from './pick.js';
import type { Picker } from './pick.js';
import { prefill } from './prefill.js';
import { TOP_LANE } from './upstream-queue.js';
import type { Prefilled } from './prefill.js';
import type { UpstreamHandler } from './upstream.js';
import type { VersionPool, Worker } from './pool.js';

/**
 * Why an attempt's request was not sent: its adapter could not be loaded on the worker (`retry`:
 * another may take it), or its prefill leg was refused (a 4xx: the client's answer) or failed.
 */
export type Unsent = { kind: 'retry'; error: GlidepathError } | Exclude<Prefilled, { kind: 'ok' }>;

/** The request an attempt sends: its upstream handler, told which prefill worker served it and why it was not sent. */
export interface Sender extends UpstreamHandler {
  prefilledBy(w: Worker): void;
  /** Whether the worker had the attempt's adapter loaded (`hit`) or loaded it first (`miss`). */
  adapterLoaded(result: 'hit' | 'miss'): void;
  unsent(u: Unsent): void;
}

/** A LoRA adapter's request: which adapter, who loads it, where its counts go. */
export interface AdapterUse {
  spec: AdapterSpec;
  loader: AdapterLoader;
  metrics: GatewayMetrics;
  /** A request waits this long for its adapter's load on one worker (the first-token limit), then tries another. */
  timeoutMs: number;
  /** The model's top-k (prefetch.ts): its load evicts one of them only when nothing else can go. */
  keep: ReadonlySet<string>;
  /** `gateway.adapter_routing: random`: the draw of a worker blind to where the adapter is (undefined: affinity). */
  random: (() => number) | undefined;
  /** Whether the version a name is served under was retired since the request chose it (adapters.ts AdapterIndex). */
  retired: (servedAs: string) => boolean;
}

export class Attempts {
  /** The worker of the current (or last) attempt. */
  worker: Worker | undefined;
  /** Attempts made (one more than the retries). */
  count = 0;
  private tried: Set<Worker> | undefined;
  /** True while `worker.outstanding` counts the request. */
  private holding = false;
  /** Lets go of the prefill worker that holds this attempt's KV blocks (prefill.ts). */
  private prefill: (() => void) | undefined;
  /** The worker whose adapter slot this attempt counts in (acquireAdapter). */
  private adapterOn: Worker | undefined;
  private readonly picker: Picker;

  constructor(
    /** The pool's picker (the prefill leg picks with it; an adapter's request through AdapterPicker). */
    private readonly base: Picker,
    private readonly pool: VersionPool,
    /** A LoRA adapter's request: workers that have it first (bounded), loaded where it goes. */
    readonly adapter?: AdapterUse,
  ) {
    this.picker =
      adapter === undefined
        ? base
        : adapter.random === undefined
          ? new AdapterPicker(base, adapter.spec.servedAs, pool.maxLoras)
          : new RandomAdapterPicker(base, adapter.spec.servedAs, pool.maxLoras, adapter.random);
  }

  /**
   * Send the attempt's request to the held worker `w`: at once; in disaggregated serving after its
   * prefill leg on a prefill worker (prefill.ts), pulling the blocks it names; for a LoRA adapter's
   * request once `w` has the adapter (loading it if it must). Nothing is sent once the attempt no
   * longer holds `w` (the request ended); `h.unsent` hears why it could not be.
   */
  send(w: Worker, path: string, stream: boolean, body: Buffer, h: Sender, timeoutMs: number): void {
    if (this.pool.disaggregated) {
      void prefill(this.base, this.pool, path, body, timeoutMs).then((r) => {
        // ended meanwhile (the client left): the prefilled blocks are not pulled, the prefill worker goes free
        if (!this.holds(w)) return r.kind === 'ok' ? r.done() : undefined;
        if (r.kind !== 'ok') return h.unsent(r);
        h.prefilledBy(r.worker);
        this.holdPrefill(r.done);
        w.upstream.dispatch(path, stream, r.body, h);
      });
      return;
    }
    if (this.adapter === undefined) {
      w.upstream.dispatch(path, stream, body, h);
      return;
    }
    const a = this.adapter;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new UnavailableError('adapter_load_failed', `worker ${w.id} did not load adapter ${a.spec.name} within ${a.timeoutMs} ms`, { retryAfterS: 1 }),
          ),
        a.timeoutMs,
      );
    });
    Promise.race([this.acquireAdapter(w), late])
      .finally(() => clearTimeout(timer))
      .then(
        (result) => {
          if (!this.holds(w)) return;
          h.adapterLoaded(result);
          w.upstream.dispatch(path, stream, body, h);
        },
        (err: unknown) => this.holds(w) && h.unsent({ kind: 'retry', error: toGlidepathError(err) }),
      );
  }

  /** The held worker has the adapter loaded (or loads it now), and counts this request in its slot; rejects (retryable 503) when it cannot. */
  private async acquireAdapter(w: Worker): Promise<'hit' | 'miss'> {
    const a = this.adapter as AdapterUse;
    const result = await w.adapters.acquire(w, a.spec, this.pool.maxLoras, a.loader, a.metrics, a.keep, a.retired(a.spec.servedAs));
    a.metrics.adapterRequests.labels(a.spec.model, w.id, result).inc();
    // the attempt ended while the adapter loaded (the client left): nothing runs there
    if (!this.holds(w)) w.adapters.done(a.spec.servedAs);
    else this.adapterOn = w;
    return result;
  }

  /**
   * The engine answered that it does not have this request's adapter (a 404 naming it) though the
   * gateway had it loaded on `w`: the slot is forgotten there, so that the next request loads it again.
   * Whether it was that.
   */
  adapterMissing(w: Worker, body: Buffer): boolean {
    const a = this.adapter;
    if (a === undefined || !body.includes(a.spec.servedAs)) return false;
    w.adapters.forget(a.spec.servedAs);
    if (this.adapterOn === w) this.adapterOn = undefined;
    return true;
  }

  /** Whether the request holds `w` now. */
  holds(w: Worker): boolean {
    return this.holding && this.worker === w;
  }

  /**
   * Take another worker of the pool, none tried before: counted as an attempt and held. Undefined when
   * none is left. `h`: the request (its lane, asked only when the pick has no slot free to it);
   * `continuation`: a broken stream's, sent where a connection is open (startsNow).
   */
  next(h: Prioritised, continuation = false): Worker | undefined {
    this.prefilled();
    const now = Date.now();
    let w = this.picker.pick(this.pool.candidates, now, this.tried);
    if (w === undefined) return undefined;
    // an adapter's request stays where the adapter picker sent it (a worker holding the adapter); a
    // disaggregated pool's decode leg is sent only after its prefill leg, when slots and connections
    // read now are stale
    if (this.adapter === undefined && !this.pool.disaggregated) w = startsNow(this.pool.candidates, w, h, continuation, now, this.tried);
    this.worker = w;
    this.count++;
    w.outstanding++;
    this.holding = true;
    return w;
  }

  /** The worker no longer counts the request (it ended there, or moves on). */
  release(): void {
    this.prefilled();
    if (this.adapterOn !== undefined) {
      this.adapterOn.adapters.done((this.adapter as AdapterUse).spec.servedAs);
      this.adapterOn = undefined;
    }
    if (this.holding && this.worker) {
      this.worker.outstanding--;
      this.holding = false;
    }
  }

  /** Hold the prefill worker of this attempt (its `done` lets go) until the decode worker answered, or the attempt ends. */
  holdPrefill(done: () => void): void {
    this.prefilled();
    this.prefill = done;
  }

  /** The decode worker answered (it pulled the blocks): the prefill worker goes free. */
  prefilled(): void {
    const done = this.prefill;
    if (done === undefined) return; // (every attempt of an aggregated pool)
    this.prefill = undefined;
    done();
  }

  /** The current worker is not to be tried again; `uncounted`: its attempt never reached it (its queue refused). */
  exclude(uncounted = false): void {
    (this.tried ??= new Set()).add(this.worker as Worker);
    if (uncounted) this.count--;
  }
}

/** What decides whether a worker has a slot free to a request: its lane (upstream.ts roomFor). */
export type Prioritised = Pick<UpstreamHandler, 'priority'>;

/**
 * Where an attempt goes: the pick, unless the request would wait in its queue while another eligible
 * worker at full weight has a slot free to it (the least busy of those takes it). The picker balances
 * on requests outstanding, queued ones included, blind to lanes: with a degradation level holding
 * slots back for the top tier, a premium request was sent to a worker whose every slot was busy (its
 * queue held no standard request, another's held two) and waited there for a stream to end, ~300 ms,
 * while the other had a slot held back for it (test/e2e/shedding.test.ts failed CI on its TTFT SLO).
 *
 * A broken stream's `continuation` also goes where an idle connection is open when the pick has none:
 * a request on a new connection is written only once its connect is heard of, after every other break
 * the event loop is handling; when a worker dies, its ~25 streams break together, and those that
 * opened a connection stood still ~8 ms longer on average than those written at once on an open one
 * (bench:resilience; docs/resilience.md). Bounding that by load (as adapter affinity does) sent a
 * burst of 48 to the dead worker's replacement, all on new connections: written after the burst and
 * admitted together there, they stood still 70–80 ms (bench:resilience, traced).
 *
 * A half-open trial pick (a finite pick budget) is kept: the trial is spent on it. A request is moved
 * only to a worker at full weight. The request's lane is asked once, and only when the pick has no
 * slot free below the top tier's.
 */
export function startsNow(
  ws: readonly Worker[],
  picked: Worker,
  h: Prioritised,
  continuation: boolean,
  now: number,
  tried: ReadonlySet<Worker> | undefined,
): Worker {
  if (picked.budget !== Infinity) return picked;
  const room = picked.upstream.roomFor(h);
  if (room && (!continuation || picked.upstream.idle > 0)) return picked;
  const lane = new OnceLane(h);
  let free: Worker | undefined; // the least busy with a slot free to it
  let open: Worker | undefined; // ... and an idle connection
  for (const w of ws) {
    if (w === picked || w.weight !== 1 || !eligible(w, now, tried) || !w.upstream.roomFor(lane)) continue;
    if (free === undefined || w.outstanding < free.outstanding) free = w;
    if (w.upstream.idle > 0 && (open === undefined || w.outstanding < open.outstanding)) open = w;
    if ((continuation ? open : free)?.outstanding === 0) break; // none can be less busy
  }
  if (continuation && open !== undefined) return open;
  return room ? picked : (free ?? picked);
}

/** A request's lane, asked of it once however many workers are looked at. */
class OnceLane implements Prioritised {
  private lane = -1;
  constructor(private readonly h: Prioritised) {}
  priority(): number {
    if (this.lane < 0) this.lane = this.h.priority?.() ?? TOP_LANE;
    return this.lane;
  }
}
