// The small pieces of the fake world behind the controllers' ports (fake-ports.ts builds the world
// from them): a clock that runs timers only when the test advances it, request records and empty
// window stats as telemetry reports them, and a worker that answers probes by its mode.
import type { KvRole } from '../../src/domain/spec.js';
import type { ProbeOutcome } from '../../src/gateway/probe.js';
import type { WorkerHealth } from '../../src/health/machine.js';
import type { Clock, WorkerInfo, WorkerRole } from '../../src/rollout/ports.js';
import type { RequestRecord } from '../../src/telemetry/record.js';
import type { WindowStats } from '../../src/telemetry/window.js';

/** Timers run only when the test advances the clock, in time order. */
export class FakeClock implements Clock {
  private seq = 0;
  private readonly tasks = new Map<number, { at: number; fn: () => void }>();
  constructor(public t = 1_000_000) {}

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    const id = ++this.seq;
    this.tasks.set(id, { at: this.t + ms, fn });
    return () => this.tasks.delete(id);
  }

  /** Due times of the pending timers, relative to now. */
  pending(): number[] {
    return [...this.tasks.values()].map((x) => x.at - this.t).sort((a, b) => a - b);
  }

  /** Run every timer due by now + ms in order; `settle` (a controller's whenIdle) is awaited after each. */
  async advance(ms: number, settle: () => Promise<void> = () => Promise.resolve()): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      const next = [...this.tasks.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!next) break;
      this.tasks.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}

export function emptyStats(): WindowStats {
  const p = { p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, mean: Number.NaN };
  return { requests: 0, errors: 0, errorRate: 0, ttftMs: p, tpotMs: p, latencyMs: p, rps: 0, tokensPerS: 0, spanS: 0 };
}

/** A successful streamed request of `version`; override any field. */
export function requestRecord(model: string, version: string, o: Partial<RequestRecord> = {}): RequestRecord {
  return {
    model,
    version,
    worker: `${model}/${version}/0`,
    status: 200,
    errorCode: undefined,
    stream: true,
    ttftMs: 20,
    queueMs: 0,
    tpotMs: 5,
    itlMs: [],
    latencyMs: 100,
    promptTokens: 8,
    completionTokens: 10,
    at: 0,
    retries: 0,
    shadow: false,
    ...o,
  };
}

/** How a fake worker answers probes. */
export type FakeMode = 'ok' | 'corrupt' | 'drift' | 'timeout' | 'error';

/** A worker of the fake world: answers probes by its mode, remembers its weight and persisted health. */
export class FakeWorker {
  mode: FakeMode = 'ok';
  /** ms a probe takes. */
  latencyMs = 20;
  weight = 1;
  budget = Infinity;
  alive = true;
  role: WorkerRole;
  health: WorkerHealth | undefined;
  probes = 0;
  kvRole: KvRole | undefined;
  constructor(
    readonly id: string,
    readonly model: string,
    readonly version: string,
    role: WorkerRole,
    readonly provider = 'sim',
    readonly startedAt = 0,
  ) {
    this.role = role;
  }

  info(): WorkerInfo {
    return {
      id: this.id,
      model: this.model,
      version: this.version,
      // one host:port per worker, as each engine is its own scrape target
      url: `http://${this.id.replaceAll('/', '.')}.fake:8000`,
      provider: this.provider,
      role: this.role,
      startedAt: this.startedAt,
      health: this.health,
      replaceable: this.provider !== 'static',
      kvRole: this.kvRole,
    };
  }

  /** A completion answer: three tokens per prompt, the same for every healthy worker of a version. */
  answer(prompt: string): ProbeOutcome {
    this.probes++;
    const ms = this.latencyMs;
    if (this.mode === 'timeout') return { kind: 'failed', timeout: true, message: 'no answer within the limit', ms };
    if (this.mode === 'error') return { kind: 'answer', status: 500, body: '{"error":"boom"}', ms };
    const tokens = [`${this.version}:${prompt.length}`, ' b', ' c'].map((t) => (this.mode === 'corrupt' ? `${t}!` : t));
    const shift = this.mode === 'drift' ? 3 : 0;
    const lps = [-0.1, -0.2, -0.3].map((x) => x - shift);
    const body = {
      choices: [
        {
          text: tokens.join(''),
          logprobs: { tokens, token_logprobs: lps, top_logprobs: tokens.map((t, i) => ({ [t]: lps[i] as number, alt: (lps[i] as number) - 2 })) },
        },
      ],
    };
    return { kind: 'answer', status: 200, body: JSON.stringify(body), ms };
  }
}
