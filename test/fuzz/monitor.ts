// What the fuzz watches while it runs: a canary client on its own keep-alive connection (a steady
// GET /health, now and then a tiny chat completion) and its latencies; the gateway's resident
// memory from /proc; the test process's own event-loop delay (the canary's latencies include it).
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { IntervalHistogram } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Client } from 'undici';

export interface CanaryStats {
  requests: number;
  chats: number;
  /** Requests that failed or answered other than 200. */
  errors: string[];
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Connections the canary's client opened (the server should keep the first one). */
  connections: number;
  /** Fuzz cases in flight when the slowest canary request started. */
  slowestDuring: string[];
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

export class Canary {
  private readonly client: Client;
  private readonly latencies: number[] = [];
  private readonly errors: string[] = [];
  private connections = 0;
  private chats = 0;
  private slowest = 0;
  private slowestDuring: string[] = [];
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    dataUrl: string,
    private readonly model: string,
    /** Pause between the end of one request and the start of the next. */
    private readonly intervalMs: number,
    private readonly inFlight: () => string[],
  ) {
    this.client = new Client(dataUrl, { keepAliveTimeout: 120_000, headersTimeout: 30_000, bodyTimeout: 30_000, pipelining: 1 });
    this.client.on('connect', () => this.connections++);
  }

  start(): void {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      // every tenth request a one-token chat completion: the path through the proxy to the worker
      const chat = i % 10 === 9;
      const during = this.inFlight();
      const t0 = performance.now();
      try {
        const res = await this.client.request(
          chat
            ? {
                path: '/v1/chat/completions',
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ model: this.model, messages: [{ role: 'user', content: 'canary' }], max_tokens: 1 }),
              }
            : { path: '/health', method: 'GET' },
        );
        const text = await res.body.text();
        const ms = performance.now() - t0;
        this.latencies.push(ms);
        if (ms > this.slowest) {
          this.slowest = ms;
          this.slowestDuring = during;
        }
        if (chat) this.chats++;
        if (res.statusCode !== 200) this.errors.push(`${chat ? 'chat' : '/health'} answered ${res.statusCode}: ${text.slice(0, 200)}`);
      } catch (err) {
        this.errors.push(`${chat ? 'chat' : '/health'} failed after ${(performance.now() - t0).toFixed(0)} ms: ${(err as Error).message}`);
      }
      await delay(this.intervalMs);
    }
  }

  async stop(): Promise<CanaryStats> {
    this.stopped = true;
    await this.loop;
    await this.client.close();
    const s = [...this.latencies].sort((a, b) => a - b);
    return {
      requests: s.length,
      chats: this.chats,
      errors: this.errors,
      p50Ms: percentile(s, 50),
      p99Ms: percentile(s, 99),
      maxMs: s[s.length - 1] ?? NaN,
      connections: this.connections,
      slowestDuring: this.slowestDuring,
    };
  }
}

/** VmRSS and VmHWM (the kernel's own peak) of `pid`, in MiB; undefined off Linux or once it is gone. */
export function memoryOf(pid: number): { rssMiB: number; hwmMiB: number } | undefined {
  let s: string;
  try {
    s = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
  const rss = /VmRSS:\s+(\d+) kB/.exec(s);
  const hwm = /VmHWM:\s+(\d+) kB/.exec(s);
  if (rss === null || hwm === null) return undefined;
  return { rssMiB: Number(rss[1]) / 1024, hwmMiB: Number(hwm[1]) / 1024 };
}

export interface RssStats {
  available: boolean;
  baselineMiB: number;
  /** The highest sampled RSS, and the kernel's high-water mark if it rose during the run (it catches spikes between samples). */
  peakMiB: number;
  hwmStartMiB: number;
  hwmEndMiB: number;
  /** Cases in flight when the highest sample was taken. */
  peakCases: string[];
  /**
   * The largest rise of RSS while a pressure case of each kind ran (they run one at a time): its
   * highest sample less the RSS when it started. V8 keeps memory it has grown into, so a case that
   * comes after a bigger one may reuse it and show less.
   */
  byPressure: Record<string, number>;
}

export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  private peak = 0;
  private peakCases: string[] = [];
  private window: { kind: string; start: number; max: number } | undefined;
  private readonly byPressure: Record<string, number> = {};
  private readonly baseline: number;
  private readonly hwmStart: number;
  readonly available: boolean;

  constructor(
    private readonly pid: number,
    private readonly inFlight: () => string[],
  ) {
    const m = memoryOf(pid);
    this.available = m !== undefined;
    this.baseline = m?.rssMiB ?? NaN;
    this.hwmStart = m?.hwmMiB ?? NaN;
    this.peak = this.baseline;
  }

  start(intervalMs: number): void {
    if (!this.available) return;
    this.timer = setInterval(() => {
      const m = memoryOf(this.pid);
      if (m !== undefined && this.window !== undefined) this.window.max = Math.max(this.window.max, m.rssMiB);
      if (m !== undefined && m.rssMiB > this.peak) {
        this.peak = m.rssMiB;
        this.peakCases = this.inFlight();
      }
    }, intervalMs);
  }

  /** A pressure case of `kind` starts (one at a time). */
  startWindow(kind: string): void {
    const now = memoryOf(this.pid)?.rssMiB ?? 0;
    this.window = { kind, start: now, max: now };
  }

  endWindow(): void {
    const w = this.window;
    if (w === undefined) return;
    this.window = undefined;
    w.max = Math.max(w.max, memoryOf(this.pid)?.rssMiB ?? 0);
    this.byPressure[w.kind] = Math.max(this.byPressure[w.kind] ?? 0, w.max - w.start);
  }

  stop(): RssStats {
    if (this.timer !== undefined) clearInterval(this.timer);
    const m = memoryOf(this.pid);
    const hwmEnd = m?.hwmMiB ?? NaN;
    const peak = Math.max(this.peak, hwmEnd > this.hwmStart ? hwmEnd : -Infinity);
    return {
      available: this.available,
      baselineMiB: this.baseline,
      peakMiB: peak,
      hwmStartMiB: this.hwmStart,
      hwmEndMiB: hwmEnd,
      peakCases: this.peakCases,
      byPressure: this.byPressure,
    };
  }
}

/** The test process's event-loop delay while the fuzz runs: time the canary's figures include that is not the gateway's. */
export function loopDelay(): { stop(): { p99Ms: number; maxMs: number } } {
  const h: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return {
    stop: () => {
      h.disable();
      return { p99Ms: h.percentile(99) / 1e6, maxMs: h.max / 1e6 };
    },
  };
}
