// Disaggregated prefill and decode, as vLLM's NIXL connector does it over plain HTTP: a prefill
// worker computes a prompt's KV (max_tokens 1) and answers with `kv_transfer_params` naming itself
// and the blocks it holds; a decode worker given those parameters pulls the blocks from it
// (`POST /kv/pull`) and generates. Blocks of another KV layout (block size, TP, tokenizer: the card)
// are refused — what a prefill/decode pair from two different pools would meet.
import { randomBytes } from 'node:crypto';
import { BadRequestError, GlidepathError, NotFoundError, UnavailableError } from '../errors.js';
import { DEFAULTS } from '../defaults.js';

/** `both` serves whole requests and either leg (vLLM's kv_both); `prefill` and `decode` serve their leg and whole requests. */
export type KvRole = 'both' | 'prefill' | 'decode';
export const KV_ROLES: readonly KvRole[] = ['both', 'prefill', 'decode'];

/** The `kv_transfer_params` of a request, as the simulator reads them. */
export interface KvTransfer {
  doRemoteDecode: boolean;
  doRemotePrefill: boolean;
  remoteEngineId: string | undefined;
  remoteBlockIds: number[] | undefined;
  remoteHost: string | undefined;
  remotePort: number | undefined;
}

/** A request's `kv_transfer_params` (null when absent); malformed ones are a 400 naming the field. */
export function readKvTransfer(raw: Record<string, unknown> | null | undefined): KvTransfer | null {
  if (raw === undefined || raw === null) return null;
  const bool = (k: string) => {
    const v = raw[k];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw new BadRequestError('invalid_request', `kv_transfer_params.${k}: expected true or false, got ${JSON.stringify(v)}`);
    return v;
  };
  const opt = <T>(k: string, ok: (v: unknown) => v is T, what: string): T | undefined => {
    const v = raw[k];
    if (v === undefined || v === null) return undefined;
    if (!ok(v)) throw new BadRequestError('invalid_request', `kv_transfer_params.${k}: expected ${what}, got ${JSON.stringify(v)}`);
    return v;
  };
  const t: KvTransfer = {
    doRemoteDecode: bool('do_remote_decode'),
    doRemotePrefill: bool('do_remote_prefill'),
    remoteEngineId: opt('remote_engine_id', (v): v is string => typeof v === 'string' && v !== '', 'an engine id'),
    remoteBlockIds: opt(
      'remote_block_ids',
      (v): v is number[] => Array.isArray(v) && v.length <= 1 << 16 && v.every((x) => Number.isInteger(x)),
      'a list of block ids',
    ),
    // a simulator pulls only from loopback peers: a request cannot make it POST anywhere else
    remoteHost: opt('remote_host', (v): v is string => typeof v === 'string' && isLoopback(v), 'a loopback address (127.x.x.x, ::1 or localhost)'),
    remotePort: opt('remote_port', (v): v is number => Number.isInteger(v) && (v as number) > 0 && (v as number) < 65536, 'a port'),
  };
  if (t.doRemoteDecode && t.doRemotePrefill)
    throw new BadRequestError('invalid_request', 'kv_transfer_params: do_remote_decode and do_remote_prefill cannot both be true');
  if (t.doRemotePrefill && (t.remoteEngineId === undefined || t.remoteBlockIds === undefined || t.remoteHost === undefined || t.remotePort === undefined)) {
    throw new BadRequestError(
      'invalid_request',
      'kv_transfer_params: do_remote_prefill needs remote_engine_id, remote_block_ids, remote_host and remote_port (the prefill answer gives them)',
    );
  }
  return t;
}

interface Held {
  layout: string;
  promptTokens: number;
  expires: number;
}

/** What a decode worker pulled: the prefilled prompt's size (its transfer time is charged instead of a prefill). */
export interface Pulled {
  promptTokens: number;
}

const S = DEFAULTS.sim;

/** One engine's side of the transfers: the blocks it holds for decode workers, and its pulls from prefill workers. */
export class KvTransfers {
  /** This engine's id in `kv_transfer_params` (vLLM's engine id). */
  readonly engineId = `sim-${randomBytes(6).toString('hex')}`;
  private readonly held = new Map<string, Held>();
  private nextBlock = 0;
  /** Where decode workers reach this engine (set once it listens). */
  address: { host: string; port: number } = { host: '127.0.0.1', port: 0 };

  constructor(
    readonly role: KvRole,
    /** The KV layout this engine writes and reads (the card checksum under Glidepath). */
    readonly layout: string,
    private readonly blockSize = 16,
    private readonly now: () => number = Date.now,
  ) {}

  /** A request's leg is one this role may serve (a decode-only worker does not prefill for others, and so on). */
  check(t: KvTransfer): void {
    if (t.doRemoteDecode && this.role === 'decode') {
      throw new BadRequestError(
        'kv_role_mismatch',
        'this worker is a decode worker: it does not prefill for a remote decode (send the prefill leg to a prefill worker)',
      );
    }
    if (t.doRemotePrefill && this.role === 'prefill') {
      throw new BadRequestError(
        'kv_role_mismatch',
        'this worker is a prefill worker: it does not decode from remote blocks (send the decode leg to a decode worker)',
      );
    }
  }

  /** A prefill is done: hold its blocks for a decode worker and answer the parameters that name them. */
  prefilled(promptTokens: number): Record<string, unknown> {
    this.expire();
    if (this.held.size >= S.kvMaxHeld)
      throw new UnavailableError('kv_transfer_full', `this prefill worker holds ${S.kvMaxHeld} transfers already`, { retryAfterS: 1 });
    const n = Math.max(1, Math.ceil(promptTokens / this.blockSize));
    const ids = Array.from({ length: n }, () => this.nextBlock++);
    this.held.set(key(ids), { layout: this.layout, promptTokens, expires: this.now() + S.kvHoldMs });
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: this.engineId,
      remote_block_ids: ids,
      remote_host: this.address.host,
      remote_port: this.address.port,
      tp_size: 1,
    };
  }

  /** `POST /kv/pull` on this (prefill) engine: the blocks go to the puller, once; their layout says whether it can read them. */
  serve(body: unknown): { kv_layout: string; prompt_tokens: number } {
    this.expire();
    const b = (typeof body === 'object' && body !== null ? body : {}) as { engine_id?: unknown; block_ids?: unknown };
    if (b.engine_id !== this.engineId) throw new NotFoundError('kv_blocks_not_found', `this is engine ${this.engineId}, not ${JSON.stringify(b.engine_id)}`);
    const ids = Array.isArray(b.block_ids) ? (b.block_ids as unknown[]) : [];
    const k = key(ids);
    const h = this.held.get(k);
    if (h === undefined)
      throw new NotFoundError('kv_blocks_not_found', `engine ${this.engineId} holds no blocks ${k} (never prefilled here, pulled already, or expired)`);
    this.held.delete(k);
    return { kv_layout: h.layout, prompt_tokens: h.promptTokens };
  }

  /** On a decode worker: pull the blocks a prefill worker named; refused when their layout is not this engine's. */
  async pull(t: KvTransfer): Promise<Pulled> {
    const host = (t.remoteHost as string).includes(':') ? `[${t.remoteHost as string}]` : (t.remoteHost as string);
    let res: Response;
    try {
      res = await fetch(`http://${host}:${t.remotePort as number}/kv/pull`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ engine_id: t.remoteEngineId, block_ids: t.remoteBlockIds }),
        signal: AbortSignal.timeout(S.kvPullTimeoutMs),
      });
    } catch (err) {
      throw new UnavailableError('kv_transfer_failed', `could not pull the KV blocks from ${host}:${t.remotePort as number}: ${(err as Error).message}`, {
        retryAfterS: 1,
      });
    }
    let got: { kv_layout?: unknown; prompt_tokens?: unknown } | null;
    try {
      const text = await res.text();
      if (text.length > PULL_ANSWER_MAX) throw new Error(`an answer of ${text.length} characters`);
      if (res.status !== 200) {
        let code: unknown;
        try {
          code = (JSON.parse(text) as { error?: { code?: unknown } } | null)?.error?.code;
        } catch {
          code = undefined;
        }
        throw new Error(`the prefill worker answered ${res.status}${typeof code === 'string' ? ` (${code})` : ''}`);
      }
      got = JSON.parse(text) as typeof got;
      if (typeof got !== 'object' || got === null) throw new Error('an answer that is not a JSON object');
    } catch (err) {
      throw new UnavailableError('kv_transfer_failed', `could not pull the KV blocks from ${host}:${t.remotePort as number}: ${(err as Error).message}`, {
        retryAfterS: 1,
      });
    }
    if (got.kv_layout !== this.layout) {
      throw new GlidepathError(
        'kv_layout_mismatch',
        `the prefill worker's KV blocks have layout ${JSON.stringify(got.kv_layout)}, this decode worker reads ${JSON.stringify(this.layout)}: a prefill and a decode worker of different cards cannot exchange KV`,
      );
    }
    return { promptTokens: typeof got.prompt_tokens === 'number' ? got.prompt_tokens : 0 };
  }

  private expire(): void {
    const t = this.now();
    for (const [k, h] of this.held) if (h.expires <= t) this.held.delete(k);
  }
}

const key = (ids: readonly unknown[]): string => `[${ids.join(',')}]`;

/** Largest pull answer read (it is a few numbers). */
const PULL_ANSWER_MAX = 64 * 1024;

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}
