// The load generator, run as its own process so it never shares an event loop with what it measures.
// Usage: node dist-bench/bench/lib/loadgen.js '<json options>' → prints one JSON result line.
import { countEvents } from './sse-count.js';
import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';

interface Options {
  url: string;
  model: string;
  connections: number;
  durationMs: number;
  warmupMs: number;
  stream: boolean;
  maxTokens: number;
  /**
   * Spread the connections' first requests evenly over this many ms (0: all at once). A closed
   * loop whose requests all start together and last equally long stays in lock-step: every stream
   * ends and restarts in the same millisecond, round after round.
   */
  staggerMs?: number;
  /** Spread the requests over these models in turn (one after another, across connections) instead of `model`. */
  models?: string[];
  /**
   * Send exactly this many requests after the warm-up, then stop (durationMs still bounds the run): an
   * instruction count per request (bench/lib/scale-callgrind.ts) divides by a known number.
   */
  requests?: number;
}

/** What one load run measured (the benchmark parses it from this process's output). */
export interface LoadResult {
  requests: number;
  errors: number;
  tokens: number;
  elapsedMs: number;
  latencyMs: number[];
  ttftMs: number[];
  itlMs: number[];
}

async function run(o: Options): Promise<LoadResult> {
  const agent = new Agent({ connections: o.connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const bodies = (o.models ?? [o.model]).map((model) =>
    JSON.stringify({ model, prompt: 'The quick brown fox', max_tokens: o.maxTokens, temperature: 0, stream: o.stream, ignore_eos: true }),
  );
  let turn = 0;
  const res: LoadResult = { requests: 0, errors: 0, tokens: 0, elapsedMs: 0, latencyMs: [], ttftMs: [], itlMs: [] };
  const t0 = performance.now();
  const measureFrom = t0 + o.warmupMs;
  const end = measureFrom + o.durationMs;
  const stagger = o.staggerMs ?? 0;
  const limit = o.requests ?? Infinity;
  let sent = 0;
  const worker = async (i: number) => {
    if (stagger > 0) await new Promise((r) => setTimeout(r, (stagger * i) / o.connections));
    while (performance.now() < end) {
      const s = performance.now();
      const measured = s >= measureFrom;
      if (measured && sent++ >= limit) break;
      const body = bodies[turn++ % bodies.length] as string;
      try {
        const r = await agent.request({ origin: o.url, path: '/v1/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body });
        let first = NaN;
        let last = NaN;
        let tokens = 0;
        let tail = '';
        for await (const chunk of r.body) {
          const now = performance.now();
          if (o.stream) {
            const c = countEvents(tail, chunk as Buffer);
            const n = c.n;
            tail = c.tail;
            if (n > 0) {
              if (first !== first) first = now;
              else if (measured) for (let k = 0; k < n; k++) res.itlMs.push(k === 0 ? now - last : 0);
              last = now;
              tokens += n;
            }
          }
        }
        const done = performance.now();
        if (!measured) continue;
        if (r.statusCode !== 200) {
          res.errors++;
          continue;
        }
        res.requests++;
        res.latencyMs.push(done - s);
        if (o.stream) {
          res.ttftMs.push(first - s);
          res.tokens += tokens;
        } else res.tokens += o.maxTokens;
      } catch {
        if (measured) res.errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: o.connections }, (_, i) => worker(i)));
  res.elapsedMs = Math.min(performance.now(), end) - measureFrom;
  await agent.close();
  return res;
}

const opts = JSON.parse(process.argv[2] ?? '{}') as Options;
run(opts).then(
  (r) => {
    process.stdout.write(`${JSON.stringify(r)}\n`);
  },
  (err: unknown) => {
    process.stderr.write(`loadgen: ${String(err)}\n`);
    process.exit(1);
  },
);
