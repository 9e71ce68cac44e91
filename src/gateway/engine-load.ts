// A worker's measured capacity: what its engine says of itself in its vLLM metrics (generated tokens,
// running and waiting sequences, KV-cache usage), read every few seconds, and the throughput learned
// from them (docs/resilience.md, "Capacity").
import { request } from 'undici';

/** The series read from an engine's /metrics, each summed over its label sets (a model, its adapters). */
export interface EngineSample {
  /** vllm:generation_tokens_total: a counter. */
  generationTokens?: number;
  running?: number;
  waiting?: number;
  /** vllm:kv_cache_usage_perc (vLLM ≥ 0.10), or vllm:gpu_cache_usage_perc before it: 0..1 (the fullest label set). */
  kvUsage?: number;
}

interface Read extends EngineSample {
  legacyKv?: number;
}

const SERIES: Readonly<Record<string, keyof Read>> = {
  'vllm:generation_tokens_total': 'generationTokens',
  'vllm:num_requests_running': 'running',
  'vllm:num_requests_waiting': 'waiting',
  'vllm:kv_cache_usage_perc': 'kvUsage',
  'vllm:gpu_cache_usage_perc': 'legacyKv',
};

/**
 * The series of SERIES in a Prometheus text exposition: every other line is skipped unread past its
 * name. A sample is `name{labels} value [timestamp]`; label values may hold spaces, braces and
 * escaped quotes, so the end of the label set is found by scanning its quotes.
 */
export function parseEngineMetrics(text: string): EngineSample {
  const out: Read = {};
  let p = 0;
  while (p < text.length) {
    let end = text.indexOf('\n', p);
    if (end === -1) end = text.length;
    if (text.charCodeAt(p) === 0x76 /* v */) sample(text, p, end, out);
    p = end + 1;
  }
  const { legacyKv, ...s } = out;
  // the newer KV name wins when an engine exports both
  if (s.kvUsage === undefined && legacyKv !== undefined) s.kvUsage = legacyKv;
  return s;
}

function sample(text: string, p: number, end: number, out: Read): void {
  let q = p;
  while (q < end && text[q] !== '{' && text[q] !== ' ' && text[q] !== '\t') q++;
  const key = SERIES[text.slice(p, q)];
  if (key === undefined) return;
  if (text[q] === '{') {
    let quoted = false;
    for (q++; q < end; q++) {
      const c = text[q];
      if (quoted && c === '\\') q++;
      else if (c === '"') quoted = !quoted;
      else if (!quoted && c === '}') break;
    }
    q++;
  }
  // the value, then an optional timestamp; spaces or tabs between (a missing value is no 0)
  const field =
    text
      .slice(q, end)
      .trim()
      .split(/[ \t]+/)[0] ?? '';
  const value = field === '' ? NaN : Number(field);
  if (!Number.isFinite(value)) return;
  const prev = out[key];
  out[key] = prev === undefined ? value : key === 'kvUsage' || key === 'legacyKv' ? Math.max(prev, value) : prev + value;
}

/** Share of KV cache in use at which an engine counts as full (it preempts or queues past it). */
const KV_FULL = 0.95;
/** Weight of a new saturated measurement in the learned capacity. */
const ALPHA = 0.3;
/** Weight of the configured worth, per unsaturated reading, in a learned capacity below it: what was learned goes stale. */
const FORGET = 0.1;

/** One worker's engine as last measured, and its learned capacity in completion tokens/s. */
export class EngineLoad {
  tokensPerS = NaN;
  running = NaN;
  waiting = NaN;
  kvUsage = NaN;
  /** Whether the engine was full at the last measurement (sequences waiting in it, KV cache or max_num_seqs used up, or every gateway slot of it busy). */
  saturated = false;
  /** ms (Date.now()) of the last sample read, and the last error (undefined: the last scrape worked). */
  at = 0;
  error: string | undefined;
  /** Whether the capacity was measured at saturation once (else it is the configured worth, or more). */
  private learned = false;
  private lastTokens = NaN;
  private lastAt = NaN;

  constructor(
    /** Completion tokens/s it serves at most: the configured worth until a measurement says otherwise. */
    public capacity: number,
    /** The configured worth, which an unsaturated engine's learned capacity drifts back to. */
    private readonly configured = capacity,
  ) {}

  /**
   * A new sample at `now`. Saturated at both ends of the interval, the engine generated what it
   * could: its throughput is its capacity (the first such reading replaces the configured worth, later
   * ones move it by an EMA, so a throttled GPU lowers it within a few reads). Not saturated, it proved
   * at least its throughput: the capacity rises to it; a learned capacity below the configured worth
   * drifts back towards it (what was learned goes stale, and an idle model — at level 4 nothing is
   * admitted — would otherwise never earn its way back). `slotsFull`: every request slot the gateway
   * gives it is in use.
   */
  observe(s: EngineSample, now: number, maxNumSeqs: number | undefined, slotsFull = false): void {
    this.at = now;
    this.error = undefined;
    this.running = s.running ?? NaN;
    this.waiting = s.waiting ?? NaN;
    this.kvUsage = s.kvUsage ?? NaN;
    const before = this.saturated;
    this.saturated = slotsFull || this.waiting > 0 || this.kvUsage >= KV_FULL || (maxNumSeqs !== undefined && this.running >= maxNumSeqs);
    const tokens = s.generationTokens ?? NaN;
    const dt = (now - this.lastAt) / 1000;
    // a restarted engine's counter starts again: no rate across the reset
    this.tokensPerS = dt > 0 && tokens >= this.lastTokens ? (tokens - this.lastTokens) / dt : NaN;
    this.lastTokens = tokens;
    this.lastAt = now;
    const tps = this.tokensPerS;
    if (tps !== tps) return;
    if (this.saturated && before) {
      // (a stalled engine that generated nothing says nothing of its capacity: health's business)
      if (tps > 0) {
        this.capacity = this.learned ? this.capacity + ALPHA * (tps - this.capacity) : tps;
        this.learned = true;
      }
    } else if (!this.saturated) {
      if (tps > this.capacity) this.capacity = tps;
      else if (this.capacity < this.configured) this.capacity += FORGET * (this.configured - this.capacity);
    }
  }

  failed(now: number, why: string): void {
    this.at = now;
    this.error = why;
  }
}

/** Largest /metrics answer read (vLLM's is ~100 KB with its histograms). */
const MAX_BYTES = 4 * 1024 * 1024;

/** GET a worker's metrics; throws with what went wrong. */
export async function scrape(url: string, timeoutMs: number): Promise<EngineSample> {
  const res = await request(url, { method: 'GET', headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
  if (res.statusCode !== 200) {
    await res.body.dump();
    throw new Error(`GET ${url} answered ${res.statusCode}`);
  }
  let size = 0;
  const parts: Buffer[] = [];
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BYTES) {
      res.body.destroy();
      throw new Error(`GET ${url}: the answer is larger than ${MAX_BYTES} bytes`);
    }
    parts.push(chunk);
  }
  const sample = parseEngineMetrics(Buffer.concat(parts).toString('utf8'));
  if (sample.generationTokens === undefined)
    throw new Error(`GET ${url}: no vllm:generation_tokens_total in the answer (not a vLLM-compatible engine's metrics)`);
  return sample;
}
