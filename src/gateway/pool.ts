// Workers and per-version pools as the data plane sees them: endpoints, load, passive health, drain.
import { DEFAULTS } from '../defaults.js';
import { AdapterSlots } from './adapters.js';
import { UpstreamPool } from './upstream.js';
import type { UpstreamOrigins } from './upstream.js';
import type { Pickable } from './pick.js';
import type { VersionTelemetry } from '../telemetry/telemetry.js';
import type { EngineTraits, KvRole, ResumeMode } from '../domain/spec.js';

export interface WorkerSpec {
  id: string;
  /** Base URL, e.g. http://127.0.0.1:9001 (a path prefix is kept). */
  url: string;
  /**
   * Health weight a new worker starts with (default 1); 0 for a spare or a replacement that must
   * pass its probes first. A worker that stays keeps the weight it has.
   */
  weight?: number | undefined;
  /** Disaggregated serving: it prefills or decodes (undefined: it serves whole requests). */
  kvRole?: KvRole | undefined;
}

export interface PoolOptions {
  connectTimeoutMs: number;
  connections: number;
  keepAliveTimeoutMs: number;
  /** Requests that may wait for a connection, and for how long (see UpstreamOptions). */
  queueMax: number;
  queueTimeoutMs: number;
  /** Spare idle connections (see UpstreamOptions; absent: none). */
  preconnectRatio?: number;
  preconnectMax?: number;
  /** Share idle connections with the other workers at the same origin (absent: the worker's own). */
  origins?: UpstreamOrigins | undefined;
}

/** Something in flight that a drain may have to abort. */
export interface Abortable {
  abortForDrain(): void;
  /** Abort it if it is being served by `w` (a worker taken out of rotation by its health); whether it was. */
  takeOff(w: Worker, why?: 'unhealthy' | 'removed'): boolean;
}

export class Worker implements Pickable {
  readonly id: string;
  readonly url: string;
  readonly upstream: UpstreamPool;
  outstanding = 0;
  ejectedUntil = 0;
  routable = true;
  /** Set by the health controller (see Pickable): 1 healthy, 0.5 suspicious, a trickle half-open, 0 out. */
  weight: number;
  budget = Infinity;
  /** Consecutive connection failures: drives the ejection back-off. */
  connectFailures = 0;
  readonly kvRole: KvRole | undefined;
  /** The LoRA adapters it holds (adapters.ts). */
  readonly adapters = new AdapterSlots();
  /** Precomputed response headers (no per-request string building). */
  readonly headers: { version: string; worker: string };
  private readonly streamHeads = new Map<string, Readonly<Record<string, string>>>();

  constructor(spec: WorkerSpec, version: string, opts: PoolOptions) {
    this.id = spec.id;
    this.url = spec.url;
    // timeouts for answers are enforced per request by the proxy (first token vs idle differ)
    this.upstream = new UpstreamPool(
      spec.url,
      {
        connections: opts.connections,
        connectTimeoutMs: opts.connectTimeoutMs,
        keepAliveTimeoutMs: opts.keepAliveTimeoutMs,
        queueMax: opts.queueMax,
        queueTimeoutMs: opts.queueTimeoutMs,
        preconnectRatio: opts.preconnectRatio,
        preconnectMax: opts.preconnectMax,
      },
      opts.origins,
    );
    this.headers = { version, worker: spec.id };
    this.weight = spec.weight ?? 1;
    this.kvRole = spec.kvRole;
  }

  /** The health controller's verdict: routing weight, and how many picks it holds for (a half-open trial). */
  setHealth(weight: number, budget = Infinity): void {
    this.weight = weight;
    this.budget = budget;
  }

  /** Passive health: a refused connection ejects the worker, doubling the back-off each time. */
  eject(now: number, baseMs: number, maxMs: number): number {
    this.connectFailures++;
    const ms = Math.min(maxMs, baseMs * 2 ** (this.connectFailures - 1));
    this.ejectedUntil = now + ms;
    return ms;
  }

  /** The headers of a stream this worker serves, one frozen object per content type (the front formats each once). */
  streamHeaders(contentType: string): Readonly<Record<string, string>> {
    let h = this.streamHeads.get(contentType);
    if (h === undefined) {
      h = Object.freeze({
        'content-type': contentType,
        'cache-control': 'no-cache',
        'x-glidepath-version': this.headers.version,
        'x-glidepath-worker': this.headers.worker,
      });
      // bounded: a worker that varies its content type gets fresh objects past a few
      if (this.streamHeads.size < 8) this.streamHeads.set(contentType, h);
    }
    return h;
  }

  succeeded(): void {
    if (this.connectFailures !== 0) this.connectFailures = 0;
  }

  async close(): Promise<void> {
    this.routable = false;
    await this.upstream.close();
  }

  destroy(): void {
    this.routable = false;
    this.upstream.destroy();
  }
}

export interface DrainResult {
  model: string;
  version: string;
  drained: number;
  aborted: number;
  elapsedMs: number;
}

/** The workers serving one version of one model. All workers share one card checksum. */
export class VersionPool {
  readonly model: string;
  readonly version: string;
  readonly cardChecksum: string;
  /** How its workers continue a broken stream. */
  resume: ResumeMode;
  /** Its workers take a completion's prompt as token ids (EngineTraits). */
  tokenIdPrompts: boolean;
  /** LoRA adapters one worker holds (EngineTraits); 0: it serves none. */
  maxLoras = 0;
  /** Sequences its engine runs at once per worker (undefined: not declared; connections_per_worker caps alone). */
  maxNumSeqs: number | undefined;
  /** The share of a worker's request slots its model's degradation level leaves (DEFAULTS.gateway.degradationConcurrency). */
  private concurrency = 1;
  private list: readonly Worker[] = [];
  /**
   * The workers the picker chooses among: routable and with a health weight (spares, unhealthy and
   * unadmitted workers are out), so a pool with a hot spare still takes the picker's fast path.
   * Recomputed on every change of the list, a weight or routability (`refresh`); a half-open trial
   * that spends its budget drops to weight 0 inside the picker, which skips it until the next refresh.
   */
  candidates: readonly Worker[] = [];
  /**
   * Disaggregated serving (its workers have prefill and decode roles): `candidates` are its decode
   * workers, which stream the answer, and each request's prompt is first prefilled on one of
   * these — always of this pool, so a pair never mixes two cards.
   */
  disaggregated = false;
  prefillCandidates: readonly Worker[] = [];
  draining = false;
  readonly inflight = new Set<Abortable>();
  /** peerLoad's last answer and when it was worked out (performance.now()). */
  private peerMean = 0;
  private peerMeanAt = -Infinity;
  readonly telemetry: VersionTelemetry;
  private idleWaiters: (() => void)[] = [];

  constructor(
    model: string,
    version: string,
    cardChecksum: string,
    telemetry: VersionTelemetry,
    traits: EngineTraits = { resume: 'continue_final_message', tokenIdPrompts: false },
  ) {
    this.model = model;
    this.version = version;
    this.cardChecksum = cardChecksum;
    this.telemetry = telemetry;
    this.resume = traits.resume;
    this.tokenIdPrompts = traits.tokenIdPrompts;
    this.maxLoras = traits.maxLoras ?? 0;
    this.maxNumSeqs = traits.maxNumSeqs;
    telemetry.metrics.trackInflight(() => this.inflight.size);
    telemetry.metrics.trackQueued(() => {
      let n = 0;
      for (const w of this.workers) n += w.upstream.queued;
      return n;
    });
  }

  enter(a: Abortable): void {
    this.inflight.add(a);
  }

  leave(a: Abortable): void {
    if (!this.inflight.delete(a)) return;
    if (this.inflight.size === 0 && this.idleWaiters.length > 0) {
      const ws = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of ws) w();
    }
  }

  /** Resolves when nothing is in flight. */
  idle(): Promise<void> {
    if (this.inflight.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Every worker of the version, spares and unhealthy ones included. Setting the list refreshes the candidates. */
  get workers(): readonly Worker[] {
    return this.list;
  }

  set workers(ws: readonly Worker[]) {
    this.list = ws;
    this.refresh();
    this.applyCaps();
  }

  /** The engine's traits again (a version re-added after a restart or a config change). */
  setTraits(traits: EngineTraits): void {
    this.resume = traits.resume;
    this.tokenIdPrompts = traits.tokenIdPrompts;
    this.maxLoras = traits.maxLoras ?? 0;
    this.maxNumSeqs = traits.maxNumSeqs;
    this.applyCaps();
  }

  /** Each worker takes this share of its request slots (a degradation level's; 1 is all). */
  setConcurrency(share: number): void {
    if (share === this.concurrency) return;
    this.concurrency = share;
    this.applyCaps();
  }

  /** Each worker's cap on requests in flight: its engine's max_num_seqs (at most its connections); below the top tier, the level's share of it. */
  private applyCaps(): void {
    for (const w of this.list) w.upstream.setCap(Math.min(w.upstream.opts.connections, this.maxNumSeqs ?? Infinity), this.concurrency);
  }

  refresh(): void {
    const up = this.list.filter((w) => w.routable && w.weight > 0);
    this.disaggregated = this.list.some((w) => w.kvRole !== undefined);
    // spares for the peers' mean: only a candidate of an aggregated pool keeps them (none towards a
    // worker out of rotation)
    for (const w of this.list) w.upstream.peerLoad = undefined;
    if (!this.disaggregated) {
      this.candidates = up;
      this.peerMeanAt = -Infinity;
      for (const w of up) {
        w.upstream.peerLoad = this.peerLoad;
        // a worker just admitted opens its spares now, before its first request
        if (w.weight === 1) w.upstream.wantSpares();
      }
      return;
    }
    this.candidates = up.filter((w) => w.kvRole === 'decode');
    this.prefillCandidates = up.filter((w) => w.kvRole === 'prefill');
  }

  /**
   * Its candidates' mean requests in flight (0 with fewer than two): what each of them keeps spare
   * connections for (UpstreamPool.peerLoad). Asked as each request starts, so worked out again at
   * most every DEFAULTS.gateway.peerLoadMs.
   */
  private readonly peerLoad = (): number => {
    const now = performance.now();
    if (now - this.peerMeanAt >= DEFAULTS.gateway.peerLoadMs) {
      this.peerMeanAt = now;
      const ws = this.candidates;
      let n = 0;
      for (const w of ws) n += w.upstream.busy;
      this.peerMean = ws.length > 1 ? n / ws.length : 0;
    }
    return this.peerMean;
  };

  routableCount(now: number): number {
    let n = 0;
    for (const w of this.workers) if (w.routable && w.weight > 0 && w.ejectedUntil <= now) n++;
    return n;
  }

  /**
   * Wait (bounded) until nothing is in flight on worker `w`, then abort what is left; `timeoutMs` 0
   * aborts at once (a worker answering garbage). Its weight must already be 0. Requests aborted
   * before their first byte move to another worker of the pool; streams end with `worker_unhealthy`
   * (its text is suspect), or for a worker `removed` (scaled down, preempted) go on elsewhere.
   */
  async drainWorker(w: Worker, timeoutMs: number, why: 'unhealthy' | 'removed'): Promise<{ aborted: number; elapsedMs: number }> {
    const t0 = performance.now();
    while (w.outstanding > 0 && performance.now() - t0 < timeoutMs) {
      await new Promise((r) => setTimeout(r, Math.min(DEFAULTS.gateway.workerDrainPollMs, timeoutMs)).unref());
    }
    let aborted = 0;
    for (const r of [...this.inflight]) if (r.takeOff(w, why)) aborted++;
    return { aborted, elapsedMs: performance.now() - t0 };
  }
}
