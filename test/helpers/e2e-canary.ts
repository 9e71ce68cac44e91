// End-to-end canary helpers: a glidepath.yaml with several simulated models (per-version faults,
// hallucination rate, latency), the control event stream (SSE) to await rollout outcomes without
// sleeping, a bounded closed-loop load generator, and the in-process simulator judge.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { parseSseEvent } from '../../src/cli/client.js';
import { startSim } from '../../src/sim/index.js';
import type { CanaryVerdictView, CanaryView } from '../../src/api/types.js';
import type { SimHandle } from '../../src/sim/index.js';
import { headerString, ROOT } from './e2e-up.js';
import type { UpProcess } from './e2e-up.js';

export interface CanaryVersionSpec {
  id: string;
  seed: number;
  interTokenMs?: number;
  /** Prefill speed: with a low value every request waits one timer of ~prompt/speed seconds. */
  prefillTokensPerS?: number;
  /** Relative SD of the simulator's seeded timing jitter (default 0). */
  jitter?: number;
  hallucinationRate?: number;
  errorRate?: number;
  latencyMultiplier?: number;
  /** Warm-up requests before the version serves (a fresh worker process runs cold JIT code). */
  warmupRequests?: number;
}

export interface CanaryModelSpec {
  name: string;
  /** The first version is the active (stable) one; the rest are registered, not loaded. */
  versions: CanaryVersionSpec[];
  canary?: {
    stages?: number[];
    stageDurationMs?: number;
    alpha?: number;
    minSamples?: number;
    maxP99Increase?: number;
    shadowShare?: number;
  };
}

export interface JudgeSpec {
  url: string;
  mode: 'pointwise' | 'pairwise';
  sampleShare?: number;
  concurrency?: number;
}

/** glidepath.yaml for several sim models, a fast control tick and an optional judge. */
export function canaryConfigYaml(opts: { dataDir: string; models: CanaryModelSpec[]; tickMs?: number; judge?: JudgeSpec; gpus?: number }): string {
  const l: string[] = [
    'server:',
    `  data_dir: ${JSON.stringify(opts.dataDir)}`,
    `gpus: { count: ${opts.gpus ?? 16}, memory_gb: 80 }`,
    `control: { tick_ms: ${opts.tickMs ?? 100} }`,
  ];
  if (opts.judge) {
    const j = opts.judge;
    l.push(
      'judge:',
      `  url: ${JSON.stringify(j.url)}`,
      '  model: judge',
      `  mode: ${j.mode}`,
      `  sample_share: ${j.sampleShare ?? 1}`,
      `  concurrency: ${j.concurrency ?? 4}`,
      '  timeout_ms: 5000',
    );
  }
  l.push('models:');
  for (const m of opts.models) {
    l.push(`  - name: ${m.name}`, '    versions:');
    for (const v of m.versions) {
      const faults: string[] = [];
      if (v.errorRate !== undefined) faults.push(`error_rate: ${v.errorRate}`);
      if (v.latencyMultiplier !== undefined) faults.push(`latency_multiplier: ${v.latencyMultiplier}`);
      const sim = [`seed: ${v.seed}`, `inter_token_ms: ${v.interTokenMs ?? 0}`, `jitter: ${v.jitter ?? 0}`];
      if (v.prefillTokensPerS !== undefined) sim.push(`prefill_tokens_per_s: ${v.prefillTokensPerS}`);
      if (v.hallucinationRate !== undefined) sim.push(`hallucination_rate: ${v.hallucinationRate}`);
      if (faults.length > 0) sim.push(`faults: { ${faults.join(', ')} }`);
      l.push(`      - id: ${v.id}`, '        replicas: 1', `        provider: { kind: sim, sim: { ${sim.join(', ')} } }`);
      if (v.warmupRequests !== undefined) l.push(`        warmup: { requests: ${v.warmupRequests}, max_tokens: 12 }`);
    }
    const first = m.versions[0];
    if (!first) throw new Error(`model ${m.name}: at least one version`);
    l.push('    route:', `      weights: { ${first.id}: 1 }`);
    const c = m.canary;
    if (c) {
      const f: string[] = [];
      if (c.stages) f.push(`stages: [${c.stages.join(', ')}]`);
      if (c.stageDurationMs !== undefined) f.push(`stage_duration_ms: ${c.stageDurationMs}`);
      if (c.alpha !== undefined) f.push(`alpha: ${c.alpha}`);
      if (c.minSamples !== undefined) f.push(`min_samples: ${c.minSamples}`);
      if (c.maxP99Increase !== undefined) f.push(`max_p99_increase: ${c.maxP99Increase}`);
      if (c.shadowShare !== undefined) f.push(`shadow_share: ${c.shadowShare}`);
      l.push(`    canary: { ${f.join(', ')} }`);
    }
  }
  l.push('');
  return l.join('\n');
}

// ---- control events (SSE) ------------------------------------------------------------------

export interface ControlEvent {
  seq: number;
  at: number;
  kind: string;
  model?: string;
  version?: string;
  message: string;
  data?: unknown;
}

/**
 * Subscribes to GET /admin/v1/events and keeps every event; `waitFor` resolves on the first event
 * (already seen or future) matching a predicate, or rejects after a timeout.
 */
export class EventStream {
  readonly events: ControlEvent[] = [];
  private waiters: { pred: (e: ControlEvent) => boolean; resolve: (e: ControlEvent) => void }[] = [];
  private readonly ac = new AbortController();
  private closed = false;
  private constructor() {}

  static async open(up: UpProcess): Promise<EventStream> {
    const s = new EventStream();
    const res = await request(`${up.adminUrl}/admin/v1/events`, {
      headers: { authorization: `Bearer ${up.token}`, accept: 'text/event-stream' },
      signal: s.ac.signal,
    });
    if (res.statusCode !== 200) throw new Error(`GET /events answered ${res.statusCode}`);
    res.body.setEncoding('utf8');
    void (async () => {
      let buf = '';
      try {
        for await (const chunk of res.body as AsyncIterable<string>) {
          buf += chunk;
          let i: number;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = parseSseEvent(block);
            if (ev && ev.data !== '') s.push(JSON.parse(ev.data) as ControlEvent);
          }
        }
      } catch {
        // closed (abort) or the process died: waiters time out with their own message
      }
    })();
    return s;
  }

  private push(e: ControlEvent): void {
    this.events.push(e);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(e)) return true;
      w.resolve(e);
      return false;
    });
  }

  waitFor(pred: (e: ControlEvent) => boolean, timeoutMs: number, what = 'event'): Promise<ControlEvent> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (e: ControlEvent) => (clearTimeout(t), resolve(e)) };
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`no ${what} within ${timeoutMs} ms; events so far:\n${this.events.map((e) => `${e.kind} ${e.model ?? ''} ${e.message}`).join('\n')}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  /**
   * Resolves on the canary of `model` reaching a terminal phase (succeeded, rolled_back, aborted,
   * failed) — or paused, which needs a human: the test fails fast on it instead of timing out.
   */
  canaryEnd(model: string, timeoutMs: number, after = 0): Promise<ControlEvent> {
    return this.waitFor(
      (e) => e.seq > after && e.model === model && /^canary_(succeeded|rolled_back|aborted|failed|paused)$/.test(e.kind),
      timeoutMs,
      `end of ${model}'s canary`,
    );
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.ac.abort();
  }
}

// ---- load ------------------------------------------------------------------------------------

export interface LoadStats {
  sent: number;
  ok: number;
  failed: number;
  byVersion: Record<string, number>;
  failedByVersion: Record<string, number>;
}

/**
 * Closed-loop load on several models: `concurrency` clients per model, each sending the next
 * non-streaming chat completion (distinct prompt, small max_tokens) as soon as the last one ends,
 * until `stop()` or `maxRequests` per model or `maxMs`. Counts responses per serving version.
 */
export class LoadGen {
  readonly stats = new Map<string, LoadStats>();
  private stopped = false;
  private readonly agent: Agent;
  readonly done: Promise<void>;
  private readonly t0 = performance.now();

  constructor(
    private readonly dataUrl: string,
    models: string[],
    private readonly opts: {
      concurrency: number;
      concurrencyFor?: Record<string, number>;
      maxTokens: number;
      maxRequests: number;
      maxMs: number;
      promptPrefix?: string;
      /** More fields of every request's body (e.g. `ignore_eos`, so every answer has max_tokens tokens). */
      extra?: Record<string, unknown>;
      headers?: (i: number) => Record<string, string>;
    },
  ) {
    const conc = (m: string) => opts.concurrencyFor?.[m] ?? opts.concurrency;
    this.agent = new Agent({ connections: models.reduce((n, m) => n + conc(m), 4), keepAliveTimeout: 30_000 });
    const runs: Promise<void>[] = [];
    for (const m of models) {
      const st: LoadStats = { sent: 0, ok: 0, failed: 0, byVersion: {}, failedByVersion: {} };
      this.stats.set(m, st);
      for (let c = 0; c < conc(m); c++) runs.push(this.client(m, st));
    }
    this.done = Promise.all(runs).then(() => this.agent.close());
  }

  private async client(model: string, st: LoadStats): Promise<void> {
    while (!this.stopped && st.sent < this.opts.maxRequests && performance.now() - this.t0 < this.opts.maxMs) {
      const i = st.sent++;
      try {
        const res = await request(`${this.dataUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...this.opts.headers?.(i) },
          body: JSON.stringify({
            model,
            messages: [{ role: 'user', content: `${this.opts.promptPrefix ?? 'Question'} ${i}: describe harbour number ${i * 7919} in a few words.` }],
            max_tokens: this.opts.maxTokens,
            temperature: 0,
            ...this.opts.extra,
          }),
          dispatcher: this.agent,
        });
        await res.body.text();
        const v = headerString(res.headers['x-glidepath-version']);
        if (res.statusCode === 200) {
          st.ok++;
          st.byVersion[v] = (st.byVersion[v] ?? 0) + 1;
        } else {
          st.failed++;
          st.failedByVersion[v] = (st.failedByVersion[v] ?? 0) + 1;
        }
      } catch {
        st.failed++;
      }
    }
  }

  stopFor(model: string): void {
    const st = this.stats.get(model);
    if (st) st.sent = Math.max(st.sent, this.opts.maxRequests);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

// ---- judge -------------------------------------------------------------------------------------

/** A simulator in this process serving the built-in `judge` model on a loopback port. */
export async function startJudge(): Promise<SimHandle> {
  // no per-token delay and instant prefill: the judge must never be the bottleneck of a test
  return startSim({ port: 0, host: '127.0.0.1', seed: 1, interTokenMs: 0, jitter: 0, loadTimeMs: 0, prefillTokensPerS: 1e9 });
}

// ---- canary view (the admin API's CanaryView, src/api/types.ts) -------------------------------------

/** Outcome summary of one finished canary, for the acceptance report. */
export function summarize(v: CanaryView, load: LoadStats | undefined, ms: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...extra,
    model: v.model,
    stable: v.stable,
    canary: v.canary,
    phase: v.phase,
    percent_at_end: v.rollback?.percent_at_rollback ?? v.percent,
    canary_requests_judged: v.rollback?.canary_requests ?? null,
    canary_responses_seen_by_clients: load?.byVersion[v.canary] ?? null,
    client_requests: load ? load.ok + load.failed : null,
    client_failures: load?.failed ?? null,
    reason: v.rollback?.reason ?? v.message ?? null,
    last_metrics: (v.verdicts.at(-1)?.metrics ?? []).map((m) => ({ name: m.name, outcome: m.outcome, reason: m.reason })),
    decisive_verdicts: v.verdicts
      .filter((x) => x.decisive)
      .map((x) => ({ stage: x.stage, percent: x.percent, outcome: x.outcome, score: x.score === null ? null : Math.round(x.score * 10) / 10, look: x.look })),
    rollback_timing_ms: v.rollback?.timing ?? null,
    seconds: Math.round(ms / 100) / 10,
  };
}

// ---- acceptance report ---------------------------------------------------------------------------

/**
 * Where the acceptance numbers go: bench/results/ with GLIDEPATH_RECORD_ACCEPTANCE=1 (`npm run
 * bench:canary`), a temp file otherwise, so a plain `npm test` leaves the work tree clean.
 */
export const ACCEPTANCE_FILE =
  process.env.GLIDEPATH_RECORD_ACCEPTANCE === '1'
    ? path.join(ROOT, 'bench/results/canary-acceptance.json')
    : path.join(os.tmpdir(), 'glidepath-canary-acceptance.json');

/** Merge one section (e.g. 'canary', 'quality', 'experiment', 'restart') into the acceptance report. */
export function recordAcceptance(section: string, data: unknown): void {
  mkdirSync(path.dirname(ACCEPTANCE_FILE), { recursive: true });
  let all: Record<string, unknown> = {};
  if (existsSync(ACCEPTANCE_FILE)) {
    try {
      all = JSON.parse(readFileSync(ACCEPTANCE_FILE, 'utf8')) as Record<string, unknown>;
    } catch {
      all = {};
    }
  }
  all[section] = { recorded_at: new Date().toISOString(), results: data };
  const tmp = `${ACCEPTANCE_FILE}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(all, null, 2)}\n`);
  renameSync(tmp, ACCEPTANCE_FILE);
}

// ---- driving a canary to its end ---------------------------------------------------------------

/** Metrics of a verdict that did not pass (nodata aside). */
export function notPassed(v: CanaryVerdictView | null | undefined): string[] {
  return (v?.metrics ?? []).filter((m) => m.outcome !== 'pass' && m.outcome !== 'nodata').map((m) => m.name);
}

/**
 * Wait for `model`'s canary to end. The judge pauses a canary whose verdict is marginal
 * (inconclusive) for a human; with `resumeThroughputPauses` the test is that human when the only
 * metric that did not pass is throughput — a ratio of two means without a statistical test, which
 * noise on a shared machine trips for equal versions (docs/canary.md) — and resumes, counting it.
 * With `waitThroughPauses` (a bad canary) a pause is not an end: the controller keeps judging the
 * paused canary and rolls it back on a failing look. Otherwise any other pause ends the wait.
 */
export async function driveToEnd(
  up: UpProcess,
  events: EventStream,
  model: string,
  timeoutMs: number,
  opts: { resumeThroughputPauses?: boolean; waitThroughPauses?: boolean } = {},
): Promise<{ view: CanaryView; resumes: number; pauseReasons: string[] }> {
  const deadline = performance.now() + timeoutMs;
  let after = 0;
  let resumes = 0;
  const pauseReasons: string[] = [];
  for (;;) {
    const e = await events.canaryEnd(model, Math.max(1, deadline - performance.now()), after);
    after = e.seq;
    const view = await up.ok<CanaryView>('GET', `/models/${model}/canary`);
    if (e.kind !== 'canary_paused' || view.phase !== 'paused') return { view, resumes, pauseReasons };
    pauseReasons.push(view.paused_reason ?? e.message);
    // a paused canary is still judged every tick and a failing look rolls it back: keep waiting
    if (opts.waitThroughPauses) continue;
    const bad = notPassed(view.last);
    if (!opts.resumeThroughputPauses || bad.length !== 1 || bad[0] !== 'throughput') return { view, resumes, pauseReasons };
    const r = await up.admin('POST', `/models/${model}/canary/resume`, {});
    if (r.status !== 200) return { view: await up.ok<CanaryView>('GET', `/models/${model}/canary`), resumes, pauseReasons };
    resumes++;
  }
}
