// A small client of Prometheus's HTTP API for instant queries (POST /api/v1/query), bounded in time
// (one deadline from connect to last byte) and in size; every failure is one error of the catalogue:
// `metrics_source_unreachable` (no answer in time) or `metrics_source_error` (an answer that is not a
// result), with Prometheus's own message quoted.
import { request } from 'undici';
import { GlidepathError } from '../errors.js';

/** One series of an instant vector. */
export interface PromSample {
  /** Its labels, `__name__` included. */
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface PromClientOptions {
  /** Base URL, without a trailing slash (the API is under /api/v1). */
  readonly url: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  /** The Authorization header, resolved at each query (undefined: none); may throw a GlidepathError. */
  readonly authorization?: (() => string | undefined) | undefined;
}

/** Prometheus writes special floats as strings. */
function sampleValue(v: unknown): number {
  if (v === '+Inf') return Infinity;
  if (v === '-Inf') return -Infinity;
  return typeof v === 'string' ? Number(v) : NaN;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parse an answer of /api/v1/query whose result must be an instant vector. */
export function parseVector(text: string, where: string): PromSample[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new GlidepathError('metrics_source_error', `${where} answered something that is not JSON: ${JSON.stringify(text.slice(0, 120))}`);
  }
  if (!isRecord(doc)) throw new GlidepathError('metrics_source_error', `${where} answered JSON that is not a Prometheus API answer`);
  if (doc.status === 'error') {
    throw new GlidepathError('metrics_source_error', `${where} refused the query (${String(doc.errorType)}): ${String(doc.error)}`);
  }
  const data = doc.data;
  if (doc.status !== 'success' || !isRecord(data)) throw new GlidepathError('metrics_source_error', `${where} answered without status "success" and data`);
  if (data.resultType !== 'vector' || !Array.isArray(data.result)) {
    throw new GlidepathError('metrics_source_error', `${where} answered a ${String(data.resultType)} where an instant vector was expected`);
  }
  const out: PromSample[] = [];
  for (const r of data.result as unknown[]) {
    if (!isRecord(r) || !isRecord(r.metric) || !Array.isArray(r.value) || r.value.length !== 2) {
      throw new GlidepathError('metrics_source_error', `${where} answered a malformed vector element`);
    }
    const labels: Record<string, string> = {};
    for (const [k, v] of Object.entries(r.metric)) labels[k] = String(v);
    out.push({ labels, value: sampleValue(r.value[1]) });
  }
  return out;
}

export class PromClient {
  constructor(private readonly o: PromClientOptions) {}

  get url(): string {
    return this.o.url;
  }

  /** The instant vector `query` evaluates to at `atMs` (epoch ms). */
  async instant(query: string, atMs: number): Promise<PromSample[]> {
    const where = `Prometheus at ${this.o.url}`;
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
    const auth = this.o.authorization?.();
    if (auth !== undefined) headers.authorization = auth;
    const body = new URLSearchParams({ query, time: (atMs / 1000).toFixed(3) }).toString();
    const signal = AbortSignal.timeout(this.o.timeoutMs);
    let text: string;
    let status: number;
    try {
      const res = await request(`${this.o.url}/api/v1/query`, {
        method: 'POST',
        headers,
        body,
        signal,
        headersTimeout: this.o.timeoutMs,
        bodyTimeout: this.o.timeoutMs,
      });
      status = res.statusCode;
      text = await readBounded(res.body, this.o.maxResponseBytes, where);
    } catch (err) {
      if (err instanceof GlidepathError) throw err;
      const why = signal.aborted ? `no answer within ${this.o.timeoutMs} ms` : (err as Error).message;
      throw new GlidepathError('metrics_source_unreachable', `${where} is unreachable: ${why}`, { cause: err });
    }
    // Prometheus answers its errors (bad query 400, 422 execution, 503 timeout) with a JSON body that says why
    if (status !== 200) throw new GlidepathError('metrics_source_error', `${where} answered HTTP ${status}: ${errorText(text)}`);
    return parseVector(text, where);
  }
}

/** Prometheus's own error from an error answer's body, else the body's start. */
function errorText(text: string): string {
  try {
    const doc: unknown = JSON.parse(text);
    if (isRecord(doc) && doc.status === 'error') return `(${String(doc.errorType)}) ${String(doc.error)}`;
  } catch {
    // not JSON: a proxy's page, say
  }
  return JSON.stringify(text.slice(0, 120));
}

/** The body as text, refusing (and dropping the connection) past `max` bytes. */
async function readBounded(body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown }, max: number, where: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    size += c.length;
    if (size > max) {
      body.destroy();
      throw new GlidepathError(
        'metrics_source_error',
        `${where} answered more than ${max} bytes (metrics_source.max_response_bytes); narrow its labels matchers`,
      );
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}
