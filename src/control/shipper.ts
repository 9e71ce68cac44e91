// What a follower ships to the leader (cluster mode, docs/cluster.md): its request records (to
// `/admin/v1/cluster/records`) and the answers it samples for the LLM judge (`/admin/v1/cluster/judge-samples`),
// each kept in a bounded buffer (the oldest dropped, and counted, while no leader takes them) and posted in
// batches of bounded size with the replicas' shared token, so that the canary judge and the quality judge
// decide on every replica's traffic, not on the leader's share of it.
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import { promptText, responseText } from '../analysis/llmjudge.js';
import { DEFAULTS } from '../defaults.js';
import type { DataPlane } from '../gateway/dataplane.js';
import type { TappedResponse } from '../gateway/tap.js';
import type { RequestRecord } from '../telemetry/record.js';
import type { Telemetry } from '../telemetry/telemetry.js';

const C = DEFAULTS.cluster;

export interface ShipperOptions {
  replica: string;
  /** The leader's admin URL now (undefined: none). */
  leader: () => string | undefined;
  /** The replicas' shared token (read from the store). */
  token: () => Promise<string | undefined>;
  /** The token was refused: read it again next time. */
  tokenRefused: () => void;
  onError: (message: string) => void;
}

/** One kind of item a follower ships: where it goes and how much of the buffer and of a request body it takes. */
interface ShipKind<T> {
  /** What the items are, in messages ("request records"). */
  what: string;
  /** The leader's admin path, and the body's array field. */
  path: string;
  field: string;
  /** One item's JSON (a smaller form when it alone would exceed a batch). */
  encode(t: T): string;
  cost(t: T): number;
  maxItems: number;
  maxCost: number;
}

/** A bounded buffer of items posted to the leader in batches; the oldest dropped (and counted) while no leader takes them. */
class Shipper<T> {
  private buf: T[] = [];
  /** What the buffer holds, by the kind's measure. */
  private cost = 0;
  private flushing = false;
  private timer: NodeJS.Timeout | undefined;
  private lastError = '';
  /** Items sent, and dropped because the buffer was full (no leader took them in time) or the leader refused them. */
  shipped = 0;
  dropped = 0;

  constructor(
    private readonly kind: ShipKind<T>,
    protected readonly opts: ShipperOptions,
  ) {}

  protected push(t: T): void {
    this.buf.push(t);
    this.cost += this.kind.cost(t);
    while (this.buf.length > this.kind.maxItems || this.cost > this.kind.maxCost) {
      const old = this.buf.shift();
      if (old === undefined) break;
      this.cost -= this.kind.cost(old);
      this.dropped++;
    }
  }

  protected startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.flush(), C.shipIntervalMs);
    this.timer.unref();
  }

  /**
   * Stop sending. `flush`: what is buffered is sent once more (a replica stopping). Not when this
   * replica takes the lead: its own telemetry holds these items already, and the leader they were
   * meant for is gone (a flush to it waits out the timeout before the new leader starts).
   */
  protected async stopTimer(o: { flush: boolean }): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (o.flush) await this.flush();
    this.buf = [];
    this.cost = 0;
  }

  /** Send what is buffered, a batch at a time; on failure it stays for the next try. */
  async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.buf.length > 0) {
        const to = this.opts.leader();
        const token = await this.opts.token();
        if (to === undefined || token === undefined) return;
        const { body, n } = batch(this.opts.replica, this.kind, this.buf);
        const res = await request(new URL(this.kind.path, to), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body,
          headersTimeout: C.shipTimeoutMs,
          bodyTimeout: C.shipTimeoutMs,
        });
        const text = await res.body.text();
        // kept for the next try: the leader's own trouble (5xx), its rate limit (429), a token it refused
        // (401/403: read again from the store); any other 4xx refuses these items as they are, and
        // sending them again would stall every later one: they are dropped
        const again = res.statusCode >= 500 || res.statusCode === 429 || res.statusCode === 401 || res.statusCode === 403;
        const sent = this.buf.splice(0, again ? 0 : n);
        for (const r of sent) this.cost -= this.kind.cost(r);
        if (res.statusCode === 401 || res.statusCode === 403) {
          this.opts.tokenRefused();
          throw new Error(`the leader at ${to} refused the replicas' token (${res.statusCode}); it is read again from the store`);
        }
        if (res.statusCode >= 400 && !again) {
          this.dropped += sent.length;
          throw new Error(
            `the leader at ${to} refused ${sent.length} of the ${this.kind.what} sent (${res.statusCode}): ${text.slice(0, 300)}; they were dropped`,
          );
        }
        if (res.statusCode !== 200) throw new Error(`the leader at ${to} answered ${res.statusCode}: ${text.slice(0, 300)}`);
        this.shipped += n;
        this.lastError = '';
      }
    } catch (err) {
      const m = `could not ship ${this.kind.what} to the leader: ${(err as Error).message}`;
      if (m !== this.lastError) this.opts.onError(m);
      this.lastError = m;
    } finally {
      this.flushing = false;
    }
  }
}

const RECORDS: ShipKind<RequestRecord> = {
  what: 'request records',
  path: '/admin/v1/cluster/records',
  field: 'records',
  // a record too large alone for a batch goes without its token gaps
  encode: (r) => {
    const s = JSON.stringify(r);
    return Buffer.byteLength(s) > C.shipBatchBytes ? JSON.stringify({ ...r, itlMs: [] }) : s;
  },
  // its fields, and its token gaps
  cost: (r) => 20 + r.itlMs.length,
  maxItems: C.shipBufferRecords,
  maxCost: C.shipBufferNumbers,
};

/** The follower's request records, from its telemetry (a shadow copy is no client's request: never judged). */
export class RecordShipper extends Shipper<RequestRecord> {
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly telemetry: Telemetry,
    opts: ShipperOptions,
  ) {
    super(RECORDS, opts);
  }

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.telemetry.subscribe((r) => {
      if (r.shadow) return;
      // bounded by size too: a long stream's token gaps are kept up to shipMaxItl (the judge's ITL samples)
      this.push(r.itlMs.length > C.shipMaxItl ? { ...r, itlMs: r.itlMs.slice(0, C.shipMaxItl) } : r);
    });
    this.startTimer();
  }

  async stop(o: { flush: boolean }): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    await this.stopTimer(o);
  }
}

/**
 * A sampled answer as a follower ships it to the leader's LLM judge: only what the judge reads (the
 * prompt's last user turn and the answer's text, each cut to shipSampleChars), never the client's
 * request as sent (its size and shape are the client's: one hostile body must not cost a shipment).
 */
export interface ShippedSample {
  model: string;
  version: string;
  adapter?: string | undefined;
  /** A half of a shadow pair (a client answer and its shadow's): this process's key for the pair. */
  pair?: string | undefined;
  shadow: boolean;
  prompt: string;
  answer: string;
}

const SAMPLES: ShipKind<ShippedSample> = {
  what: 'judge samples',
  path: '/admin/v1/cluster/judge-samples',
  field: 'samples',
  encode: (s) => JSON.stringify(s),
  // in bytes, as the buffer's limit is (an answer in a non-Latin script takes up to 3 a character)
  cost: (s) => Buffer.byteLength(s.prompt) + Buffer.byteLength(s.answer) + 256,
  maxItems: C.shipBufferSamples,
  maxCost: C.shipBufferSampleBytes,
};

/**
 * The answers a follower samples for the LLM judge (`judge:` in the config): its data plane taps the
 * same share of each model's answers as the leader's does (pointwise; a shadow answer and the client
 * answer it pairs with in pairwise mode) and ships them, so quality is judged on every replica's traffic.
 */
export class SampleShipper extends Shipper<ShippedSample> {
  private tapped = false;
  /** Pair ids are this process's: a replica restarted under the same name starts them again. */
  private readonly incarnation = randomUUID();

  constructor(
    private readonly dp: DataPlane,
    private readonly judge: { mode: 'pointwise' | 'pairwise'; sampleShare: number },
    opts: ShipperOptions,
  ) {
    super(SAMPLES, opts);
  }

  /** Tap every model the data plane serves now; the mirror taps the models it adds later (`tap`). */
  start(): void {
    this.tapped = true;
    for (const m of this.dp.models.keys()) this.tap(m);
    this.startTimer();
  }

  /** A model the data plane serves from now on, tapped while this shipper runs. */
  tap(model: string): void {
    if (!this.tapped || !this.dp.models.has(model)) return;
    this.dp.setTap(model, { share: this.judge.mode === 'pointwise' ? this.judge.sampleShare : 0, listener: this.listener });
  }

  async stop(o: { flush: boolean }): Promise<void> {
    if (this.tapped) for (const m of this.dp.models.keys()) this.dp.setTap(m, undefined);
    this.tapped = false;
    await this.stopTimer(o);
  }

  private readonly listener = (r: TappedResponse): void => {
    if (r.status !== 200) return; // the judge scores answers only
    const cut = (t: string) => (t.length > C.shipSampleChars ? t.slice(0, C.shipSampleChars) : t);
    this.push({
      model: r.model,
      version: r.version,
      adapter: r.adapter,
      pair: r.pairId === undefined ? undefined : `${this.incarnation}:${r.pairId}`,
      shadow: r.shadow,
      prompt: cut(promptText(r.request)),
      answer: cut(responseText(r.body, r.request.stream)),
    });
  };
}

/** The first items of `buf` that fit one request body (at least one). */
function batch<T>(replica: string, kind: ShipKind<T>, buf: readonly T[]): { body: string; n: number } {
  const parts: string[] = [];
  let size = 0;
  for (const t of buf) {
    const s = kind.encode(t);
    // in bytes: the leader reads at most 1 MiB of them
    const bytes = Buffer.byteLength(s);
    if (parts.length > 0 && (size + bytes > C.shipBatchBytes || parts.length >= C.shipBatchRecords)) break;
    parts.push(s);
    size += bytes + 1;
  }
  return { body: `{"replica":${JSON.stringify(replica)},"${kind.field}":[${parts.join(',')}]}`, n: parts.length };
}
