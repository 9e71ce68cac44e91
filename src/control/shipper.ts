// A follower's request records, shipped to the leader (cluster mode, docs/cluster.md): kept in a bounded
// buffer (the oldest dropped, and counted, while no leader takes them), posted in batches of bounded size
// to the leader's `/admin/v1/cluster/records` with the replicas' shared token, so that the canary judge
// decides on every replica's traffic, not on the leader's share of it.
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
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

export class RecordShipper {
  private buf: RequestRecord[] = [];
  /** What the buffer holds, in numbers (records × their fields, and their token gaps). */
  private cost = 0;
  private flushing = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private lastError = '';
  /** Records sent, and dropped because the buffer was full (no leader took them in time). */
  shipped = 0;
  dropped = 0;

  constructor(
    private readonly telemetry: Telemetry,
    private readonly opts: ShipperOptions,
  ) {}

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.telemetry.subscribe((r) => {
      if (r.shadow) return; // a mirrored copy is no client's request: never judged
      // bounded by size too: a long stream's token gaps are kept up to shipMaxItl (the judge's ITL samples)
      const kept = r.itlMs.length > C.shipMaxItl ? { ...r, itlMs: r.itlMs.slice(0, C.shipMaxItl) } : r;
      this.buf.push(kept);
      this.cost += cost(kept);
      while (this.buf.length > C.shipBufferRecords || this.cost > C.shipBufferNumbers) {
        const old = this.buf.shift();
        if (!old) break;
        this.cost -= cost(old);
        this.dropped++;
      }
    });
    this.timer = setInterval(() => void this.flush(), C.shipIntervalMs);
    this.timer.unref();
  }

  /**
   * Stop listening. `flush`: what is buffered is sent once more (a replica stopping). Not when this
   * replica takes the lead: its own telemetry holds these records already, and the leader they were
   * meant for is gone (a flush to it waits out the timeout before the new leader starts).
   */
  async stop(o: { flush: boolean }): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
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
        const { body, n } = batch(this.opts.replica, this.buf);
        const res = await request(new URL('/admin/v1/cluster/records', to), {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body,
          headersTimeout: C.shipTimeoutMs,
          bodyTimeout: C.shipTimeoutMs,
        });
        const text = await res.body.text();
        // kept for the next try: the leader's own trouble (5xx), its rate limit (429), a token it refused
        // (401/403: read again from the store); any other 4xx refuses these records as they are, and
        // sending them again would stall every later one: they are dropped
        const again = res.statusCode >= 500 || res.statusCode === 429 || res.statusCode === 401 || res.statusCode === 403;
        const sent = this.buf.splice(0, again ? 0 : n);
        for (const r of sent) this.cost -= cost(r);
        if (res.statusCode === 401 || res.statusCode === 403) {
          this.opts.tokenRefused();
          throw new Error(`the leader at ${to} refused the replicas' token (${res.statusCode}); it is read again from the store`);
        }
        if (res.statusCode >= 400 && !again) {
          this.dropped += sent.length;
          throw new Error(`the leader at ${to} refused ${sent.length} record(s) (${res.statusCode}): ${text.slice(0, 300)}; they were dropped`);
        }
        if (res.statusCode !== 200) throw new Error(`the leader at ${to} answered ${res.statusCode}: ${text.slice(0, 300)}`);
        this.shipped += n;
        this.lastError = '';
      }
    } catch (err) {
      const m = `could not ship request records to the leader: ${(err as Error).message}`;
      if (m !== this.lastError) this.opts.onError(m);
      this.lastError = m;
    } finally {
      this.flushing = false;
    }
  }
}

/** The first records of `buf` that fit one request body; a record too large alone goes without its token gaps. */
function batch(replica: string, buf: readonly RequestRecord[]): { body: string; n: number } {
  const parts: string[] = [];
  let size = 0;
  for (const r of buf) {
    let s = JSON.stringify(r);
    if (s.length > C.shipBatchBytes) s = JSON.stringify({ ...r, itlMs: [] });
    if (parts.length > 0 && (size + s.length > C.shipBatchBytes || parts.length >= C.shipBatchRecords)) break;
    parts.push(s);
    size += s.length + 1;
  }
  return { body: `{"replica":${JSON.stringify(replica)},"records":[${parts.join(',')}]}`, n: parts.length };
}

/** A record's weight in the buffer: its fields, and its token gaps. */
function cost(r: RequestRecord): number {
  return 20 + r.itlMs.length;
}
