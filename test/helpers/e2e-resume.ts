// Resumption under fire, for the e2e test and `npm run bench:resilience`: many concurrent streams
// through a real `glidepath up` over simulated workers while workers are killed, hang or send
// garbage; every stream compared with its unbroken reference (text and usage).
import { request } from 'undici';
import type { Agent } from 'undici';
import { readSse } from '../../src/cli/client.js';
import { loadAgent, trackWorkerPids } from './e2e-up.js';
import type { UpProcess, WorkerView } from './e2e-up.js';

export const MODEL = 'chat';

export function resilienceYaml(dataDir: string, o: { replicas: number; interTokenMs: number; idleTimeoutMs: number }): string {
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 16, memory_gb: 80 }',
    `gateway: { first_token_timeout_ms: 5000, idle_timeout_ms: ${o.idleTimeoutMs} }`,
    'models:',
    `  - name: ${MODEL}`,
    '    health: { interval_ms: 1000, jitter: 0.2, timeout_ms: 1000, recovery_timeout_ms: 2000, dead_after_failed_recoveries: 1 }',
    '    versions:',
    '      - id: v1',
    `        replicas: ${o.replicas}`,
    `        provider: { kind: sim, sim: { seed: 23, inter_token_ms: ${o.interTokenMs}, jitter: 0, max_num_seqs: 256 } }`,
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

export interface Streamed {
  prompt: string;
  ok: boolean;
  text: string;
  usage: { prompt_tokens: number; completion_tokens: number } | undefined;
  error: string | undefined;
  ids: number;
}

/** One streamed chat at temperature 0 with usage, read to its end. */
export async function stream(base: string, prompt: string, maxTokens: number, dispatcher?: Agent): Promise<Streamed> {
  const out: Streamed = { prompt, ok: false, text: '', usage: undefined, error: undefined, ids: 0 };
  const ids = new Set<string>();
  try {
    const res = await request(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: prompt }],
        max_tokens: maxTokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
        ignore_eos: true,
      }),
      dispatcher,
    });
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${(await res.body.text()).slice(0, 200)}`);
    let done = false;
    for await (const ev of readSse(res.body)) {
      if (ev.data === '[DONE]') {
        done = true;
        continue;
      }
      const j = JSON.parse(ev.data) as { id?: string; error?: unknown; usage?: Streamed['usage']; choices?: { delta?: { content?: string } }[] };
      if (j.error !== undefined) throw new Error(`error event: ${JSON.stringify(j.error).slice(0, 300)}`);
      if (j.id !== undefined) ids.add(j.id);
      if (j.usage) out.usage = j.usage;
      const t = j.choices?.[0]?.delta?.content;
      if (t) out.text += t;
    }
    if (!done) throw new Error('no [DONE]');
    out.ok = true;
  } catch (err) {
    out.error = (err as Error).message;
  }
  out.ids = ids.size;
  return out;
}

/** `n` prompts streamed all at once through `base`. */
export async function wave(base: string, prompts: readonly string[], maxTokens: number): Promise<Streamed[]> {
  const agent = loadAgent(prompts.length);
  try {
    return await Promise.all(prompts.map((p) => stream(base, p, maxTokens, agent)));
  } finally {
    await agent.close();
  }
}

export const workers = (up: UpProcess): Promise<(WorkerView & { role?: string; weight?: number; outstanding: number })[]> => up.ok('GET', '/workers');

/**
 * Kill -9 a serving worker of `up` every `everyMs` until `stop` resolves; the pids killed. The k-th
 * kill takes the (k mod n)-th of the n serving workers, or with `busy` of those with streams in flight
 * when any has (bench:resilience: a replacement admitted since the last kill holds none until the next
 * wave, and killing it breaks nothing). `beforeKill` runs just before each kill (a bench reads the
 * gateway's metrics there, so that each kill's migrations can be told apart).
 */
export async function killEvery(
  up: UpProcess,
  everyMs: number,
  stop: Promise<unknown>,
  o: { beforeKill?: () => Promise<void>; busy?: boolean } = {},
): Promise<number[]> {
  const killed: number[] = [];
  let stopped = false;
  void stop.then(() => (stopped = true));
  while (!stopped) {
    await Promise.race([new Promise((r) => setTimeout(r, everyMs)), stop]);
    if (stopped) break;
    const ws = await workers(up);
    trackWorkerPids(ws.map((w) => w.pid));
    const serving = ws.filter((w) => w.pid !== null && w.state === 'ready' && (w.weight ?? 1) > 0 && !killed.includes(w.pid));
    const busy = o.busy === true ? serving.filter((w) => w.outstanding > 0) : [];
    const from = busy.length > 0 ? busy : serving;
    const victim = from[killed.length % Math.max(1, from.length)];
    if (victim?.pid == null || serving.length < 2) continue;
    await o.beforeKill?.();
    if (stopped) break;
    process.kill(victim.pid, 'SIGKILL');
    killed.push(victim.pid);
  }
  return killed;
}

/** Set a simulator fault on one worker through its own admin API. */
export async function setFault(endpoint: string, body: Record<string, unknown>): Promise<void> {
  const res = await request(`${endpoint}/admin/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.statusCode !== 200) throw new Error(`faults: ${res.statusCode} ${await res.body.text()}`);
  await res.body.dump();
}

export interface MigrationMetrics {
  outcomes: Record<string, number>;
  stallCount: number;
  stallSumS: number;
  /** Cumulative stall histogram: upper bound (s) → count. */
  stallBuckets: Map<number, number>;
  reprefill: number;
}

/** The gateway's migration counters by outcome, the stall histogram, and the tokens re-prefilled. */
export async function migrationMetrics(up: UpProcess): Promise<MigrationMetrics> {
  const text = await (await request(`${up.dataUrl}/metrics`)).body.text();
  const stallBuckets = new Map<number, number>();
  for (const m of text.matchAll(/^glidepath_stream_migration_stall_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)/gm)) {
    stallBuckets.set(m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2]));
  }
  const outcomes: Record<string, number> = {};
  for (const m of text.matchAll(/^glidepath_stream_migrations_total\{[^}]*outcome="(\w+)"[^}]*\} (\d+)/gm)) {
    outcomes[m[1] as string] = (outcomes[m[1] as string] ?? 0) + Number(m[2]);
  }
  const num = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  return {
    outcomes,
    stallCount: num(/^glidepath_stream_migration_stall_seconds_count\{[^}]*\} (\S+)/m),
    stallSumS: num(/^glidepath_stream_migration_stall_seconds_sum\{[^}]*\} (\S+)/m),
    stallBuckets,
    reprefill: num(/^glidepath_stream_reprefill_tokens_total\{[^}]*\} (\S+)/m),
  };
}

/** How a wave compares with its references. */
export function compare(got: readonly Streamed[], ref: ReadonlyMap<string, Streamed>): { failed: string[]; textDiffers: number; usageDiffers: number } {
  const failed: string[] = [];
  let textDiffers = 0;
  let usageDiffers = 0;
  for (const g of got) {
    if (!g.ok || g.ids !== 1) {
      failed.push(`${g.prompt}: ${g.error ?? `${g.ids} ids`}`);
      continue;
    }
    const r = ref.get(g.prompt) as Streamed;
    if (g.text !== r.text) textDiffers++;
    if (JSON.stringify(g.usage) !== JSON.stringify(r.usage)) usageDiffers++;
  }
  return { failed, textDiffers, usageDiffers };
}

/** The bucket bound (ms) under which a fraction `q` of the stalls observed between two readings fell. */
export function stallQuantileMs(before: MigrationMetrics, after: MigrationMetrics, q: number): number {
  const total = after.stallCount - before.stallCount;
  if (total === 0) return NaN;
  for (const [le, n] of [...after.stallBuckets].sort((a, b) => a[0] - b[0])) {
    if (n - (before.stallBuckets.get(le) ?? 0) >= q * total) return le * 1000;
  }
  return Infinity;
}
