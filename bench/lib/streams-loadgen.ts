// bench:scale's slow-stream load generator, a process of its own: `streams` connections, opened at a steady
// rate, each streaming one completion after another; prints one JSON summary line (TTFT by concurrency,
// inter-token gaps while streams were opening and once all were open, errors by kind).
// Usage: node dist-bench/bench/lib/streams-loadgen.js '<json options>'
import { countEvents } from './sse-count.js';
import { performance } from 'node:perf_hooks';
import { connect as h2connect } from 'node:http2';
import type { ClientHttp2Session, IncomingHttpHeaders } from 'node:http2';
import { Client } from 'undici';
import { quantileSorted } from '../../src/domain/quantile.js';

export interface StreamsOptions {
  url: string;
  model: string;
  /** Connections, each with one stream at a time: the concurrency once all are open. */
  streams: number;
  /** New streams per second: connection i starts its first stream at i / ratePerS s; later ones start as earlier ones end, at about the same rate. */
  ratePerS: number;
  /** Tokens per stream. */
  tokens: number;
  /** No stream starts after this many ms (those running finish). */
  durationMs: number;
  /** HTTP/2 with prior knowledge over this many connections, streams spread over them in turn; 0 or absent: HTTP/1.1, a connection per stream. */
  h2Connections?: number;
}

/**
 * One request on connection `i`: `onData` gets the status and each piece of the body as it arrives;
 * resolves with the status once the body has ended. Callbacks, not streams or async iterators: at
 * 10,000 streams the load generator's own CPU per token competes with the gateway it measures.
 */
type Send = (i: number, body: string, onData: (status: number, chunk: Buffer) => void) => Promise<number>;

/** HTTP/1.1: a client of its own per connection (one pool of 10,000 would scan its clients on every request). */
function h1Sender(url: string): { send: Send; close(): Promise<void> } {
  const clients: Client[] = [];
  const headers = { 'content-type': 'application/json' };
  return {
    send(i, body, onData) {
      const c = (clients[i] ??= new Client(url, { pipelining: 1, keepAliveTimeout: 600_000, headersTimeout: 0, bodyTimeout: 0 }));
      return new Promise((resolve, reject) => {
        let status = 0;
        c.dispatch(
          { path: '/v1/completions', method: 'POST', headers, body },
          {
            // (undici takes a handler as one of this API only with onRequestStart)
            onRequestStart() {},
            onResponseStart(_c, code) {
              status = code;
            },
            onResponseData(_c, chunk) {
              onData(status, chunk);
            },
            onResponseEnd() {
              resolve(status);
            },
            onResponseError(_c, err) {
              reject(err);
            },
          },
        );
      });
    },
    async close() {
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}

/** HTTP/2 with prior knowledge: request `i` on connection i mod `n` (opened on first use). */
function h2Sender(url: string, n: number): { send: Send; close(): Promise<void> } {
  const sessions: ClientHttp2Session[] = [];
  const session = (i: number): ClientHttp2Session => {
    const k = i % n;
    let s = sessions[k];
    if (s === undefined || s.closed || s.destroyed) {
      s = h2connect(url);
      s.on('error', () => undefined);
      sessions[k] = s;
    }
    return s;
  };
  return {
    send(i, body, onData) {
      return new Promise((resolve, reject) => {
        let status = 0;
        const st = session(i).request({ ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' });
        st.once('error', reject);
        st.once('response', (h: IncomingHttpHeaders) => (status = Number(h[':status'])));
        st.on('data', (c: Buffer) => onData(status, c));
        st.once('end', () => resolve(status));
        // reset without an error event (a CANCEL): a failure, not a request left waiting (after 'end', a no-op)
        st.once('close', () => reject(Object.assign(new Error(`stream reset (${st.rstCode})`), { code: `H2_RST_${st.rstCode}` })));
        st.end(body);
      });
    },
    close() {
      for (const s of sessions) s.close();
      return Promise.resolve();
    },
  };
}

export interface Quantiles {
  n: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

export interface StreamsResult {
  streams: number;
  requests: number;
  errors: number;
  /** Errors by kind: `status <code>`, `short <tokens>` (a stream that ended early) or the exception's code/message. */
  errorKinds: Record<string, number>;
  maxInFlight: number;
  /** Gaps between a stream's consecutive tokens while connections were still opening, and once all were open. */
  itlOpening: Quantiles;
  itlSteady: Quantiles;
  ttft: Quantiles;
  /** TTFT of streams started with this many others in flight (five bands of `streams`). */
  ttftByConcurrency: (Quantiles & { from: number; to: number })[];
  elapsedMs: number;
  cpuMs: number;
}

function quantiles(xs: number[]): Quantiles {
  const s = Float64Array.from(xs).sort();
  const q = (p: number): number => (s.length === 0 ? NaN : quantileSorted(s, p));
  return { n: s.length, p50: q(0.5), p99: q(0.99), p999: q(0.999), max: s.length === 0 ? NaN : (s[s.length - 1] as number) };
}

async function run(o: StreamsOptions): Promise<StreamsResult> {
  const sender = (o.h2Connections ?? 0) > 0 ? h2Sender(o.url, o.h2Connections as number) : h1Sender(o.url);
  const body = JSON.stringify({ model: o.model, prompt: 'The quick brown fox', max_tokens: o.tokens, temperature: 0, stream: true, ignore_eos: true });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const openedBy = t0 + (1000 * o.streams) / o.ratePerS;
  const end = t0 + o.durationMs;
  const itlOpening: number[] = [];
  const itlSteady: number[] = [];
  const ttft: { at: number; ms: number }[] = [];
  const errorKinds: Record<string, number> = {};
  let requests = 0;
  let errors = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const fail = (kind: string): void => {
    errors++;
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
  };
  const one = async (i: number): Promise<void> => {
    const s = performance.now();
    const at = inFlight++;
    if (inFlight > maxInFlight) maxInFlight = inFlight;
    try {
      let last = NaN;
      let tokens = 0;
      let tail = '';
      // an error answer's body (its code names the refusal: server_overloaded, worker_queue_full, …)
      let refusal = '';
      const status = await sender.send(i, body, (st, chunk) => {
        if (st !== 200) {
          if (refusal.length < 4096) refusal += chunk.toString();
          return;
        }
        const now = performance.now();
        const c = countEvents(tail, chunk);
        const n = c.n;
        tail = c.tail;
        if (n === 0) return;
        if (tokens === 0) ttft.push({ at, ms: now - s });
        else (now < openedBy ? itlOpening : itlSteady).push(now - last);
        for (let k = 1; k < n; k++) (now < openedBy ? itlOpening : itlSteady).push(0);
        last = now;
        tokens += n;
      });
      if (status !== 200) {
        let code = '';
        try {
          const e = (JSON.parse(refusal) as { error?: { code?: unknown } }).error?.code;
          if (typeof e === 'string') code = ` ${e}`;
        } catch {
          // not an OpenAI error body: the status alone
        }
        fail(`status ${status}${code}`);
        // a refused stream is tried again after its Retry-After (1 s), not in a loop
        await new Promise((res) => setTimeout(res, 1000));
        return;
      }
      if (tokens < o.tokens) fail(`short ${tokens}`);
      else requests++;
    } catch (err) {
      fail((err as NodeJS.ErrnoException).code ?? String(err).slice(0, 80));
      // nor is a failed one (a refused connect fails at once)
      await new Promise((res) => setTimeout(res, 1000));
    } finally {
      inFlight--;
    }
  };
  const conn = async (i: number): Promise<void> => {
    await new Promise((r) => setTimeout(r, (1000 * i) / o.ratePerS));
    while (performance.now() < end) await one(i);
  };
  await Promise.all(Array.from({ length: o.streams }, (_, i) => conn(i)));
  const elapsedMs = performance.now() - t0;
  await sender.close();
  const cpu = process.cpuUsage(cpu0);
  const bands = 5;
  const ttftByConcurrency = Array.from({ length: bands }, (_, b) => {
    const from = Math.floor((b * o.streams) / bands);
    const to = Math.floor(((b + 1) * o.streams) / bands);
    return { from, to, ...quantiles(ttft.filter((t) => t.at >= from && (t.at < to || b === bands - 1)).map((t) => t.ms)) };
  });
  return {
    streams: o.streams,
    requests,
    errors,
    errorKinds,
    maxInFlight,
    itlOpening: quantiles(itlOpening),
    itlSteady: quantiles(itlSteady),
    ttft: quantiles(ttft.map((t) => t.ms)),
    ttftByConcurrency,
    elapsedMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
}

run(JSON.parse(process.argv[2] ?? '{}') as StreamsOptions).then(
  (r) => process.stdout.write(`${JSON.stringify(r)}\n`),
  (err: unknown) => {
    process.stderr.write(`streams-loadgen: ${String(err)}\n`);
    process.exit(1);
  },
);
