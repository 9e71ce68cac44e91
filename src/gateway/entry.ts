// The request path into the data plane: the model (or LoRA adapter) named, admission by tier while
// degraded, the hold queue (a drain-first swap, a time-shared model asleep), the version the route chooses, the proxied
// request, shadow mirroring and response capture.
import { performance } from 'node:perf_hooks';
import { BadRequestError, NotFoundError, UnavailableError, toGlidepathError } from '../errors.js';
import { checkContentType } from '../http/body.js';
import type { AdapterIndex, AdapterLoader, AdapterSpec } from './adapters.js';
import type { AdapterUse } from './attempts.js';
import type { FrontRequest, FrontResponse } from './front.js';
import type { HoldRejected } from './hold.js';
import type { ModelState } from './model-state.js';
import type { VersionPool } from './pool.js';
import type { AdapterPrefetcher } from './prefetch.js';
import { ProxyRequest } from './proxy.js';
import type { ProxyContext } from './proxy-context.js';
import { parseRequest } from './request.js';
import type { Endpoint, ParsedRequest } from './request.js';
import { sendError } from './respond.js';
import { mirror } from './shadow.js';
import type { SplitReason } from './split.js';

const PATHS: Record<Endpoint, string> = { chat: '/v1/chat/completions', completions: '/v1/completions' };

export class RequestEntry {
  private pairSeq = 0;
  private readonly isRetired = (servedAs: string): boolean => this.adapters.isRetired(servedAs);

  constructor(
    private readonly ctx: ProxyContext,
    private readonly models: ReadonlyMap<string, ModelState>,
    private readonly adapters: AdapterIndex,
    private readonly adapterLoader: AdapterLoader | undefined,
    private readonly prefetcher: AdapterPrefetcher,
    /** Shadow and capture sampling, and `adapter_routing: random`'s draw. */
    private readonly rand: () => number,
  ) {}

  /** Handle POST /v1/chat/completions or /v1/completions (the body is complete: the front read it). Never throws. */
  handle(req: FrontRequest, res: FrontResponse, endpoint: Endpoint): void {
    const startedAt = performance.now();
    const at = Date.now();
    try {
      checkContentType(req.headers['content-type']);
      let parsed = parseRequest(req.body, endpoint);
      // a LoRA adapter's name: its model's workers serve it (under its own name)
      const adapter = this.models.has(parsed.model) ? undefined : this.adapters.get(parsed.model);
      const st = this.models.get(adapter === undefined ? parsed.model : adapter.model);
      if (st === undefined) {
        throw new NotFoundError('model_not_found', `The model \`${parsed.model}\` does not exist. Available: ${[...this.models.keys()].join(', ')}`);
      }
      const adm = st.admission;
      // degraded: the request's tier decides (thrown: shed); otherwise one comparison
      if (adm !== undefined && adm.level !== 0) parsed = adm.admit(req, parsed);
      const q = st.hold;
      if (q !== undefined) {
        const wait = q.enqueue();
        if (wait === undefined) {
          this.ctx.metrics.holdRejected.labels(st.name, 'full').inc();
          throw new UnavailableError('hold_queue_full', `model ${st.name} ${q.why} and its hold queue is full`, { retryAfterS: 1 });
        }
        wait.then(
          () => {
            // the wait is the gateway's, not the version's: its TTFT and latency start now (the wait has its own histogram)
            const heldMs = performance.now() - startedAt;
            this.ctx.metrics.holdWait.labels(st.name).observe(heldMs / 1000);
            // the adapter as it is registered now: a canary may have ended while the request was held
            const now = adapter === undefined ? undefined : this.adapters.get(adapter.name);
            if (adapter !== undefined && now === undefined) {
              sendError(
                res,
                new NotFoundError('model_not_found', `The model \`${adapter.name}\` does not exist (its adapter was removed while the request waited)`),
              );
              return;
            }
            this.dispatch(req, res, endpoint, parsed, st, startedAt + heldMs, at + heldMs, now);
          },
          (err: HoldRejected) => {
            this.ctx.metrics.holdRejected.labels(st.name, err.reason).inc();
            sendError(
              res,
              // the queue's own limit: hold() may have been given one other than the config's
              new UnavailableError('hold_timeout', `model ${st.name} ${q.why}; request waited ${q.timeoutMs} ms`, {
                retryAfterS: Math.max(1, Math.ceil(q.timeoutMs / 1000)),
              }),
            );
          },
        );
        return;
      }
      this.dispatch(req, res, endpoint, parsed, st, startedAt, at, adapter);
    } catch (err) {
      sendError(res, toGlidepathError(err));
    }
  }

  private dispatch(
    req: FrontRequest,
    res: FrontResponse,
    endpoint: Endpoint,
    parsed: ReturnType<typeof parseRequest>,
    st: ModelState,
    startedAt: number,
    at: number,
    adapter: AdapterSpec | undefined,
  ): void {
    if (res.destroyed) return;
    const split = st.split; // one read of the snapshot: everything below uses this route
    const h = req.headers;
    let explicit: string | undefined;
    if (this.ctx.cfg.allowVersionHeader) {
      const v = h[this.ctx.cfg.versionHeader];
      if (typeof v === 'string') {
        if (!split.route.versions.some((x) => x.id === v)) {
          sendError(
            res,
            new BadRequestError('unknown_version', `${this.ctx.cfg.versionHeader}: version ${JSON.stringify(v)} is not in the route of ${st.name}`),
          );
          return;
        }
        explicit = v;
      }
    }
    const cat = h[this.ctx.cfg.categoryHeader];
    const sticky = h[this.ctx.cfg.stickyHeader];
    const stickyKey = typeof sticky === 'string' ? sticky : parsed.user;
    const choice = split.choose(explicit, typeof cat === 'string' ? cat : undefined, stickyKey);
    this.countSplit(st, choice.version, choice.reason);
    const pool = st.pools.get(choice.version);
    if (pool === undefined || pool.draining) {
      sendError(res, new UnavailableError('version_unavailable', `version ${choice.version} of ${st.name} is not accepting requests`, { retryAfterS: 1 }));
      return;
    }
    let use: AdapterUse | undefined;
    let sent = parsed;
    if (adapter !== undefined) {
      // an adapter canary's candidate for its share of the adapter's requests (the same user on the same side)
      use = this.adapterUse(this.adapters.variant(adapter, stickyKey, this.rand), st, pool, res);
      if (use === undefined) return;
      if (use.spec.servedAs !== parsed.model) sent = servedAs(parsed, use.spec.servedAs);
    }
    const pr = new ProxyRequest(this.ctx, pool, res, sent, PATHS[endpoint], startedAt, at, st.admission, req, use);
    const tap = st.tap;
    const shadow = split.route.shadow;
    // (an adapter's request is not mirrored: the shadow version's workers would have to load it)
    if (use === undefined && shadow !== undefined && shadow.version !== choice.version && shadow.share > 0 && this.rand() < shadow.share) {
      const sp = st.pools.get(shadow.version);
      if (sp && !sp.draining) {
        const pairId = tap === undefined ? undefined : ++this.pairSeq;
        mirror(this.ctx, sp, parsed, PATHS[endpoint], tap, pairId, startedAt, at);
        if (tap !== undefined) pr.captureTo(tap, pairId);
      }
    } else if (tap !== undefined && tap.share > 0 && this.rand() < tap.share) {
      pr.captureTo(tap, undefined);
    }
    pr.start();
  }

  private countSplit(st: ModelState, version: string, reason: SplitReason): void {
    let byReason = st.splitCounters.get(version);
    if (byReason === undefined) {
      byReason = {};
      st.splitCounters.set(version, byReason);
    }
    (byReason[reason] ??= this.ctx.metrics.splitRequests.labels(st.name, version, reason)).inc();
  }

  /** What an adapter's request needs to load it (attempts.ts), or undefined when the version serves none (answered 503). */
  private adapterUse(adapter: AdapterSpec, st: ModelState, pool: VersionPool, res: FrontResponse): AdapterUse | undefined {
    const loader = this.adapterLoader;
    const why =
      loader === undefined
        ? 'this gateway loads no adapters'
        : pool.disaggregated
          ? 'prefill/decode versions serve none yet'
          : pool.maxLoras <= 0
            ? `its engine's max_loras is ${pool.maxLoras}`
            : undefined;
    if (loader === undefined || why !== undefined) {
      sendError(
        res,
        new UnavailableError('adapter_unsupported', `adapter ${adapter.name}: version ${pool.version} of ${st.name} serves no LoRA adapters (${why})`),
      );
      return undefined;
    }
    this.ctx.metrics.adapterRequestsByName.labels(st.name, adapter.name).inc();
    this.prefetcher.requested(adapter.name, performance.now());
    return {
      spec: adapter,
      loader,
      metrics: this.ctx.metrics,
      timeoutMs: this.ctx.cfg.firstTokenTimeoutMs,
      keep: this.prefetcher.keepFor(st.name),
      random: this.ctx.cfg.adapterRouting === 'random' ? this.rand : undefined,
      retired: this.isRetired,
    };
  }
}

/** The request as the engine must get it: `model` names the adapter as it is loaded there (`<name>--<version>`). */
function servedAs(p: ParsedRequest, name: string): ParsedRequest {
  const body = { ...p.body, model: name };
  return { ...p, body, model: name, raw: Buffer.from(JSON.stringify(body)) };
}
