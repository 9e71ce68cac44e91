// Connection admission for a listener: a ceiling on open client connections (kept below the process's
// descriptor limit) and per-client-address limits on concurrent connections and on the request rate.
import { readFileSync } from 'node:fs';
import { DEFAULTS } from '../defaults.js';
import { CATALOGUE } from '../errors.js';
import type { ErrorCode } from '../errors.js';

export interface ListenerLimits {
  /** Most client connections open at once on this listener (0: no ceiling). */
  readonly maxConnections: number;
  /** Most connections open at once from one client address (0: no limit). */
  readonly perClientConnections: number;
  /** Requests per second one client address may start, sustained (0: no limit). */
  readonly perClientRps: number;
  /** Requests one client address may start at once above the sustained rate (at least 1 when a rate is set). */
  readonly perClientBurst: number;
}

/** Why a connection or request was refused. */
export type Refusal = 'capacity' | 'client_connections' | 'client_rate';

interface ClientEntry {
  conns: number;
  /** HTTP/2 streams in flight past their connection's first (two weigh one connection, as against the ceiling). */
  streams: number;
  tokens: number;
  /** performance.now() when `tokens` was last brought up to date. */
  at: number;
}

/**
 * The soft RLIMIT_NOFILE of this process (Node raises it to the hard limit at start-up), read from
 * /proc/self/limits; undefined where that file does not exist or says "unlimited".
 */
export function descriptorLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The connection ceiling used when the configuration says 0 ("auto"): every client connection of a
 * proxy may hold a worker connection too, so half of what the descriptor limit leaves after a
 * reserve for everything else (store, logs, the admin API, pipes to child processes).
 */
export function autoMaxConnections(fdLimit: number | undefined): number {
  if (fdLimit === undefined) return 0;
  const reserve = Math.max(DEFAULTS.limits.fdReserve, Math.ceil(fdLimit * DEFAULTS.limits.fdReserveShare));
  return Math.max(1, Math.floor((fdLimit - reserve) / 2));
}

/**
 * The descriptor limit under which the auto ceiling admits `connections` client connections: the
 * inverse of autoMaxConnections (two descriptors per proxied stream, client and worker, plus the
 * reserve). What the docs and the start-up log tell an operator to set (`LimitNOFILE=`, `ulimit -n`).
 */
export function descriptorsFor(connections: number): number {
  const { fdReserve, fdReserveShare } = DEFAULTS.limits;
  let limit = Math.max(2 * connections + fdReserve, Math.ceil((2 * connections) / (1 - fdReserveShare)));
  while (autoMaxConnections(limit) < connections) limit++;
  return limit;
}

/**
 * Counts per client address. Memory is bounded: an address has an entry only while it has open
 * connections or a bucket that has not refilled, and entries of neither kind are swept when the map
 * has doubled since the last sweep.
 */
export class ClientLimits {
  readonly settings: ListenerLimits;
  private readonly clients = new Map<string, ClientEntry>();
  private readonly now: () => number;
  private sweepAt: number = DEFAULTS.limits.clientTableSweepAt;
  /** Client connections open now (admitted and not yet closed). */
  open = 0;
  /**
   * HTTP/2 streams in flight past their connection's first: each holds one descriptor (its worker's
   * connection) where an HTTP/1.1 connection holds two, so two of them weigh one connection against
   * the ceiling (front-h2.ts).
   */
  extraStreams = 0;
  /** The per-client map is kept at all (a limit per address is set). */
  private readonly perClient: boolean;

  constructor(settings: ListenerLimits, now: () => number = () => performance.now()) {
    this.settings = settings;
    this.now = now;
    this.perClient = settings.perClientConnections > 0 || settings.perClientRps > 0;
  }

  /** A new connection from `addr`: undefined when admitted (close() must follow), else why not. */
  admit(addr: string): Refusal | undefined {
    const s = this.settings;
    if (s.maxConnections > 0 && 2 * this.open + this.extraStreams + 2 > 2 * s.maxConnections) return 'capacity';
    if (this.perClient) {
      const e = this.entry(addr);
      if (s.perClientConnections > 0 && 2 * e.conns + e.streams + 2 > 2 * s.perClientConnections) return 'client_connections';
      e.conns++;
    }
    this.open++;
    return undefined;
  }

  /** An admitted connection from `addr` closed. */
  close(addr: string): void {
    this.open--;
    if (!this.perClient) return;
    const e = this.clients.get(addr);
    if (e === undefined) return;
    e.conns--;
    if (e.conns <= 0 && this.refilled(e)) this.clients.delete(addr);
  }

  /**
   * An HTTP/2 stream past the first of a connection from `addr`: undefined when admitted (releaseStream() must follow), else
   * why not. It weighs half a connection against the ceiling and against the address's per-client limit.
   */
  admitStream(addr: string): Refusal | undefined {
    const s = this.settings;
    if (s.maxConnections > 0 && 2 * this.open + this.extraStreams + 1 > 2 * s.maxConnections) return 'capacity';
    if (s.perClientConnections > 0) {
      // the connection's entry (an address has one while it has a connection open)
      const e = this.clients.get(addr);
      if (e !== undefined) {
        if (2 * e.conns + e.streams + 1 > 2 * s.perClientConnections) return 'client_connections';
        e.streams++;
      }
    }
    this.extraStreams++;
    return undefined;
  }

  releaseStream(addr: string): void {
    this.extraStreams--;
    if (this.settings.perClientConnections <= 0) return;
    // (an entry forgotten since, its connection closed first, has nothing to give back)
    const e = this.clients.get(addr);
    if (e !== undefined && e.streams > 0) e.streams--;
  }

  /** Whether a request rate is enforced (take() is worth calling). */
  get rateLimited(): boolean {
    return this.settings.perClientRps > 0;
  }

  /** A request from `addr`: 0 when allowed, else the seconds after which one would be (for Retry-After). */
  take(addr: string): number {
    const s = this.settings;
    const e = this.entry(addr);
    const now = this.now();
    const burst = Math.max(1, s.perClientBurst);
    e.tokens = Math.min(burst, e.tokens + ((now - e.at) * s.perClientRps) / 1000);
    e.at = now;
    if (e.tokens >= 1) {
      e.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - e.tokens) / s.perClientRps));
  }

  /** Addresses with an entry now (for tests and metrics). */
  get tracked(): number {
    return this.clients.size;
  }

  private entry(addr: string): ClientEntry {
    let e = this.clients.get(addr);
    if (e === undefined) {
      e = { conns: 0, streams: 0, tokens: Math.max(1, this.settings.perClientBurst), at: this.now() };
      this.clients.set(addr, e);
      if (this.clients.size >= this.sweepAt) this.sweep();
    }
    return e;
  }

  private refilled(e: ClientEntry): boolean {
    const s = this.settings;
    if (s.perClientRps <= 0) return true;
    return e.tokens + ((this.now() - e.at) * s.perClientRps) / 1000 >= Math.max(1, s.perClientBurst);
  }

  private sweep(): void {
    for (const [addr, e] of this.clients) if (e.conns <= 0 && this.refilled(e)) this.clients.delete(addr);
    this.sweepAt = Math.max(DEFAULTS.limits.clientTableSweepAt, this.clients.size * 2);
  }
}

/** What a refused client is told: status (the code's, from the catalogue), code, a message naming the limit, and when to retry. */
export interface RefusalAnswer {
  readonly why: Refusal;
  readonly status: number;
  readonly code: RefusalCode;
  readonly message: string;
  readonly retryAfterS: number;
}

type RefusalCode = Extract<ErrorCode, 'server_overloaded' | 'too_many_connections' | 'rate_limited'>;

/** The one wording of every refusal, on both listeners and at either moment (accept, request). */
export function refusalAnswer(why: Refusal, s: ListenerLimits, addr: string, retryAfterS: number = DEFAULTS.limits.retryAfterS): RefusalAnswer {
  const answer = (code: RefusalCode, message: string): RefusalAnswer => ({ why, status: CATALOGUE[code][0], code, message, retryAfterS });
  switch (why) {
    case 'capacity':
      return answer('server_overloaded', `the server is at its limit of ${s.maxConnections} client connections; retry shortly`);
    case 'client_connections':
      return answer('too_many_connections', `too many connections from ${addr || 'this address'}: at most ${s.perClientConnections} at once`);
    default:
      return answer('rate_limited', `too many requests from ${addr || 'this address'}: at most ${s.perClientRps} per second (burst ${s.perClientBurst})`);
  }
}

/**
 * A request the listener refuses (undefined: serve it). Past the ceiling a connection is taken for
 * probe paths only (GET or HEAD of `probePaths`); a client over its request rate is refused.
 */
export function requestRefusal(
  limits: ClientLimits,
  probePaths: ReadonlySet<string> | null,
  probeOnly: boolean,
  addr: string,
  method: string,
  url: string,
): RefusalAnswer | undefined {
  if (probeOnly) {
    const q = url.indexOf('?');
    const probe = (method === 'GET' || method === 'HEAD') && probePaths !== null && probePaths.has(q === -1 ? url : url.slice(0, q));
    return probe ? undefined : refusalAnswer('capacity', limits.settings, addr);
  }
  if (!limits.rateLimited) return undefined;
  const wait = limits.take(addr);
  return wait > 0 ? refusalAnswer('client_rate', limits.settings, addr, wait) : undefined;
}
