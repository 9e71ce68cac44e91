// Disaggregated serving's first leg, as vLLM's NIXL proxy does it over plain HTTP: the request goes to
// a prefill worker of the same pool with `max_tokens: 1`, not streamed, asking for a remote decode;
// its answer names the KV blocks it holds (`kv_transfer_params`), which the decode leg — the client's
// request sent to a decode worker of that pool — pulls. A pool is one card, so a pair never mixes two.
import { UpstreamError } from '../errors.js';
import type { GlidepathError } from '../errors.js';
import type { Picker } from './pick.js';
import type { VersionPool, Worker } from './pool.js';
import { sendProbe } from './probe.js';

/**
 * The prefill leg's outcome: the decode leg's body, or the prefill worker's own refusal (a 4xx, passed
 * through), or a failure. On `ok` the prefill worker still counts the request (its `outstanding`)
 * until the decode worker has pulled the blocks: the caller calls `done` then — a drain of the
 * prefill worker waits for it, so a rolling update never stops it under a pull.
 */
export type Prefilled =
  | { kind: 'ok'; worker: Worker; body: Buffer; done: () => void }
  /** `error`: what the refusal means for a broken stream's continuation (which cannot pass the answer on). */
  | { kind: 'refused'; worker: Worker; status: number; body: Buffer; error: GlidepathError }
  | { kind: 'failed'; error: GlidepathError };

/** Prefill workers tried for one request before it fails (each a different worker). */
const TRIES = 2;
/** A prefill answer is one token and the transfer parameters: a few KB at most. */
const ANSWER_MAX = 256 * 1024;

type Body = Record<string, unknown>;

/**
 * Run the prefill leg of `body` (the client's request, or a broken stream's continuation) on a
 * prefill worker of `pool`, trying another on a failure; `timeoutMs` bounds each try.
 */
export async function prefill(picker: Picker, pool: VersionPool, path: string, body: Buffer, timeoutMs: number): Promise<Prefilled> {
  let req: Body;
  try {
    req = JSON.parse(body.toString('utf8')) as Body;
  } catch {
    return { kind: 'failed', error: new UpstreamError('upstream_error', 'the request body is not JSON: it cannot be split into a prefill and a decode leg') };
  }
  const leg: Body = { ...req, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } };
  if ('max_completion_tokens' in leg) leg.max_completion_tokens = 1;
  delete leg.stream_options;
  let tried: Set<Worker> | undefined;
  let last = 'no prefill worker of the version takes traffic';
  for (let i = 0; i < TRIES; i++) {
    const w = picker.pick(pool.prefillCandidates, Date.now(), tried);
    if (w === undefined) break;
    (tried ??= new Set()).add(w);
    w.outstanding++;
    let held = true;
    const done = () => {
      if (held) w.outstanding--;
      held = false;
    };
    const o = await sendProbe(w, path, leg, timeoutMs, ANSWER_MAX);
    const params = o.kind === 'answer' && o.status === 200 ? kvParams(o.body) : undefined;
    if (params !== undefined) return { kind: 'ok', worker: w, body: Buffer.from(JSON.stringify({ ...req, kv_transfer_params: params })), done };
    done();
    if (o.kind !== 'answer') {
      last = `prefill worker ${w.id}: ${o.message}`;
      continue;
    }
    if (o.status >= 400 && o.status < 500) {
      const error = new UpstreamError('upstream_resume_refused', `prefill worker ${w.id} refused the continuation (${o.status})`);
      return { kind: 'refused', worker: w, status: o.status, body: Buffer.from(o.body), error };
    }
    last = `prefill worker ${w.id} answered ${o.status}${o.status === 200 ? ' without kv_transfer_params' : `: ${o.body.slice(0, 200)}`}`;
  }
  return { kind: 'failed', error: new UpstreamError('upstream_error', `the prefill leg of ${pool.model}/${pool.version} failed: ${last}`) };
}

/** The `kv_transfer_params` of a prefill answer (an object), or undefined. */
function kvParams(text: string): Body | undefined {
  try {
    const p = (JSON.parse(text) as { kv_transfer_params?: unknown } | null)?.kv_transfer_params;
    return typeof p === 'object' && p !== null && !Array.isArray(p) ? (p as Body) : undefined;
  } catch {
    return undefined;
  }
}
