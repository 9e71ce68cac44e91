// `npm run bench:health`: what worker health costs and what it buys (issue 14), on `glidepath up`
// over simulated workers under steady streaming load.
//   A. Probe overhead: the gateway's CPU per probe (probes every 25 ms per worker with no traffic,
//      against health off, same idle gateway) and the effect of probing on traffic latency (p50/p99
//      of streamed requests with probes every 250 ms per worker, against health off), in alternating rounds.
//   B. Detection time per fault kind, probes every 2 s: silent corruption, logprob drift, errors, a
//      hang, a 3× slowdown, a crash; from the fault's injection to the health event that acts on it.
//   C. Time to capacity restored after a kill -9 of a worker: with a hot spare (exit → spare serving)
//      and without (exit → its replacement admitted by its probes).
//   D. False positives: a healthy fleet under load probed 10,000 times: drains (must be 0) and the
//      false-suspicion rate.
// Writes bench/results/health.md and health.json. Loopback only; every process is stopped at the end.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { readSse } from '../src/cli/client.js';
import { quantileSorted } from '../src/domain/quantile.js';
import { cpuMs, freePort, start, waitFor, ROOT } from './lib/proc.js';
import type { Proc } from './lib/proc.js';

const root = ROOT;
const CLI = path.join(root, 'dist/cli/main.js');
const MODEL = 'm';
const ROUNDS = 3;
const CLIENTS = 8;

interface Up {
  proc: Proc;
  data: string;
  admin: string;
  token: string;
  dir: string;
  events: { kind: string; at: number; message: string; data?: { worker?: string; to?: string } }[];
  stop(): Promise<void>;
}

function configYaml(dir: string, o: { replicas: number; spares?: number; health: Record<string, unknown>; interTokenMs?: number }): string {
  return [
    'server:',
    `  data_dir: ${JSON.stringify(path.join(dir, 'state'))}`,
    'gpus: { count: 16, memory_gb: 80 }',
    'gateway: { first_token_timeout_ms: 2500, idle_timeout_ms: 2000 }',
    'models:',
    `  - name: ${MODEL}`,
    `    health: ${JSON.stringify(o.health)}`,
    '    versions:',
    '      - id: v1',
    `        replicas: ${o.replicas}`,
    ...(o.spares ? [`        spares: ${o.spares}`] : []),
    `        provider: { kind: sim, sim: { seed: 5, inter_token_ms: ${o.interTokenMs ?? 10}, jitter: 0 } }`,
    '    route: { weights: { v1: 1 } }',
    '',
  ].join('\n');
}

async function up(o: Parameters<typeof configYaml>[1]): Promise<Up> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-bench-health-'));
  const cfg = path.join(dir, 'glidepath.yaml');
  writeFileSync(cfg, configYaml(dir, o));
  const [dp, ap] = [await freePort(), await freePort()];
  const proc = start(process.execPath, [CLI, 'up', '--config', cfg, '--listen', `127.0.0.1:${dp}`, '--admin-listen', `127.0.0.1:${ap}`], {
    ...process.env,
    GLIDEPATH_LOG_LEVEL: 'warn',
  });
  const admin = `http://127.0.0.1:${ap}`;
  await waitFor(`http://127.0.0.1:${dp}/health`, 60_000);
  const token = readFileSync(path.join(dir, 'state', 'admin-token'), 'utf8').trim();
  const events: Up['events'] = [];
  const ac = new AbortController();
  void (async () => {
    try {
      const res = await request(`${admin}/admin/v1/events`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, signal: ac.signal });
      for await (const e of readSse(res.body)) if (e.data !== '') events.push(JSON.parse(e.data) as Up['events'][number]);
    } catch {
      // stopped
    }
  })();
  return {
    proc,
    data: `http://127.0.0.1:${dp}`,
    admin,
    token,
    dir,
    events,
    async stop() {
      ac.abort();
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function api<T>(u: Up, method: string, p: string): Promise<T> {
  const r = await request(`${u.admin}/admin/v1${p}`, { method, headers: { authorization: `Bearer ${u.token}` } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${method} ${p}: ${r.statusCode} ${text}`);
  return JSON.parse(text) as T;
}

interface W {
  id: string;
  endpoint: string;
  pid: number | null;
  role: string;
  weight: number | null;
  health: { state: string; baseline_ms: number | null } | null;
}

/** Until the workers satisfy `pred` (the admin API is what there is to watch; polled). */
async function until(u: Up, pred: (ws: W[]) => boolean, what: string, ms = 60_000): Promise<W[]> {
  const end = Date.now() + ms;
  for (;;) {
    const ws = await api<W[]>(u, 'GET', '/workers');
    if (pred(ws)) return ws;
    if (Date.now() > end) throw new Error(`workers never ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function event(u: Up, pred: (e: Up['events'][number]) => boolean, what: string, ms = 60_000): Promise<Up['events'][number]> {
  const end = Date.now() + ms;
  for (;;) {
    const e = u.events.find(pred);
    if (e) return e;
    if (Date.now() > end) throw new Error(`no ${what} event within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function fault(w: W, body: Record<string, unknown>): Promise<void> {
  const r = await request(`${w.endpoint}/admin/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await r.body.dump();
}

/** CLIENTS loops of streamed chats; latencies (ms) of the ones that succeeded. */
function load(u: Up): { stop(): Promise<number[]> } {
  const agent = new Agent({ connections: CLIENTS });
  const lat: number[] = [];
  let running = true;
  let n = 0;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (running) {
      const t0 = performance.now();
      try {
        const r = await request(`${u.data}/v1/chat/completions`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `question ${n++ % 50}` }], max_tokens: 16, temperature: 0, stream: true }),
        });
        const t = await r.body.text();
        if (r.statusCode === 200 && t.includes('[DONE]') && !t.includes('"error"')) lat.push(performance.now() - t0);
      } catch {
        // counted as not succeeded
      }
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      await agent.close();
      return lat;
    },
  };
}

async function probeCount(u: Up): Promise<number> {
  const r = await request(`${u.data}/metrics`);
  let n = 0;
  for (const m of (await r.body.text()).matchAll(/glidepath_health_probes_total\{[^}]*check="routine"[^}]*\} (\d+)/g)) n += Number(m[1]);
  return n;
}

const q = (xs: number[], p: number) =>
  quantileSorted(
    [...xs].sort((a, b) => a - b),
    p,
  );
const median = (xs: number[]) => q(xs, 0.5);

// ---- A. overhead ------------------------------------------------------------------------------

async function overhead(): Promise<{ cpuPerProbeUs: number[]; latency: { on: { p50: number; p99: number }; off: { p50: number; p99: number } }[] }> {
  const cpuPerProbeUs: number[] = [];
  const latency: { on: { p50: number; p99: number }; off: { p50: number; p99: number } }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // CPU per probe: idle gateway, probes every 25 ms per worker, against the same with health off
    const cpu: Record<string, { ms: number; probes: number }> = {};
    for (const mode of r % 2 === 0 ? ['on', 'off'] : ['off', 'on']) {
      const u = await up({ replicas: 4, health: mode === 'on' ? { interval_ms: 25, jitter: 0.2 } : { enabled: false } });
      try {
        if (mode === 'on') await until(u, (ws) => ws.every((w) => w.health?.baseline_ms != null), 'probed');
        const [c0, p0] = [cpuMs(u.proc.pid), mode === 'on' ? await probeCount(u) : 0];
        await new Promise((res) => setTimeout(res, 10_000));
        cpu[mode] = { ms: cpuMs(u.proc.pid) - c0, probes: (mode === 'on' ? await probeCount(u) : 0) - p0 };
      } finally {
        await u.stop();
      }
    }
    const on = cpu.on as { ms: number; probes: number };
    cpuPerProbeUs.push(((on.ms - (cpu.off as { ms: number }).ms) * 1000) / on.probes);
    // traffic latency with probes every 250 ms per worker against health off, 10 s of load each
    const lat: Record<string, { p50: number; p99: number }> = {};
    for (const mode of r % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
      const u = await up({ replicas: 4, health: mode === 'on' ? { interval_ms: 250 } : { enabled: false } });
      try {
        const warm = load(u);
        await new Promise((res) => setTimeout(res, 2_000)); // warm-up, not measured
        await warm.stop();
        const m = load(u);
        await new Promise((res) => setTimeout(res, 10_000));
        const xs = await m.stop();
        lat[mode] = { p50: q(xs, 0.5), p99: q(xs, 0.99) };
      } finally {
        await u.stop();
      }
    }
    latency.push({ on: lat.on as { p50: number; p99: number }, off: lat.off as { p50: number; p99: number } });
    console.error(
      `overhead round ${r + 1}: ${cpuPerProbeUs[r]?.toFixed(0)} µs CPU per probe; p50/p99 on ${lat.on?.p50.toFixed(1)}/${lat.on?.p99.toFixed(1)} off ${lat.off?.p50.toFixed(1)}/${lat.off?.p99.toFixed(1)} ms`,
    );
  }
  return { cpuPerProbeUs, latency };
}

// ---- B. detection ------------------------------------------------------------------------------

const FAULTS: { kind: string; body: Record<string, unknown> | 'kill'; until: string; signal: string }[] = [
  { kind: 'silent corruption', body: { corrupt: true }, until: 'draining', signal: 'probe: token_mismatch' },
  { kind: 'logprob drift (same tokens)', body: { logprob_drift: 2 }, until: 'draining', signal: 'probe: logprob_drift' },
  { kind: 'errors (every request 500)', body: { error_rate: 1 }, until: 'unhealthy', signal: 'traffic 5xx and probes' },
  { kind: 'hang', body: { hang: true }, until: 'unhealthy', signal: 'request timeouts and probe timeouts' },
  { kind: '3× slowdown', body: { latency_multiplier: 3 }, until: 'suspicious', signal: 'probe latency spike / TTFT outlier' },
  { kind: 'crash (kill -9)', body: 'kill', until: 'dead', signal: 'process exit' },
];

async function detection(): Promise<Record<string, number[]>> {
  const out: Record<string, number[]> = {};
  for (let r = 0; r < ROUNDS; r++) {
    const u = await up({ replicas: FAULTS.length + 2, health: { interval_ms: 2000, jitter: 0.2, timeout_ms: 1000, replace: false } });
    try {
      const l = load(u);
      const ws = await until(u, (x) => x.every((w) => w.health?.baseline_ms != null), 'probed');
      for (const [i, f] of FAULTS.entries()) {
        const w = ws[i] as W;
        // a random moment in the probe cycle
        await new Promise((res) => setTimeout(res, Math.random() * 2000));
        const t0 = Date.now();
        if (f.body === 'kill') process.kill(w.pid as number, 'SIGKILL');
        else await fault(w, f.body);
        const e = await event(u, (x) => x.kind === 'worker_health' && x.data?.worker === w.id && x.data.to === f.until, `${w.id} ${f.until}`);
        (out[f.kind] ??= []).push(e.at - t0);
      }
      await l.stop();
    } finally {
      await u.stop();
    }
    console.error(
      `detection round ${r + 1}: ${Object.entries(out)
        .map(([k, v]) => `${k} ${v[r]} ms`)
        .join(', ')}`,
    );
  }
  return out;
}

// ---- C. capacity restored ----------------------------------------------------------------------

async function restore(spares: number): Promise<number[]> {
  const out: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const u = await up({ replicas: 4, spares, health: { interval_ms: 2000 } });
    try {
      const l = load(u);
      const ws = await until(u, (x) => x.length === 4 + spares && x.every((w) => w.health?.state === 'healthy'), 'healthy');
      const victim = ws.find((w) => w.role === 'serving') as W;
      process.kill(victim.pid as number, 'SIGKILL');
      const exited = await event(u, (x) => x.kind === 'worker_exited', 'worker_exited');
      const back =
        spares > 0
          ? await event(u, (x) => x.kind === 'spare_promoted', 'spare_promoted')
          : await event(
              u,
              (x) => x.kind === 'worker_health' && x.data?.to === 'healthy' && x.data.worker !== victim.id && x.at > exited.at,
              'replacement healthy',
            );
      out.push(back.at - exited.at);
      await l.stop();
    } finally {
      await u.stop();
    }
  }
  return out;
}

// ---- D. false positives -------------------------------------------------------------------------

const FP_PROBES = 10_000;

async function falsePositives(): Promise<{ probes: number; drains: number; suspicions: number; inconclusive: number; seconds: number }> {
  // fast workers (1 ms/token) so that 10,000 probes take a minute or two: probes every 20 ms per worker
  const u = await up({ replicas: 4, interTokenMs: 1, health: { interval_ms: 20 } });
  try {
    const l = load(u);
    const t0 = performance.now();
    while ((await probeCount(u)) < FP_PROBES && performance.now() - t0 < 600_000) await new Promise((r) => setTimeout(r, 500));
    await l.stop();
    const r = await request(`${u.data}/metrics`);
    const text = await r.body.text();
    let inconclusive = 0;
    for (const m of text.matchAll(/glidepath_health_probes_total\{[^}]*outcome="inconclusive"[^}]*\} (\d+)/g)) inconclusive += Number(m[1]);
    const changes = u.events.filter((e) => e.kind === 'worker_health');
    return {
      probes: await probeCount(u),
      drains: changes.filter((e) => /unhealthy|draining|dead/.test(String(e.data?.to))).length,
      suspicions: changes.filter((e) => e.data?.to === 'suspicious').length,
      inconclusive,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await u.stop();
  }
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build`);
  const started = new Date().toISOString();
  const a = await overhead();
  const b = await detection();
  const withSpare = await restore(1);
  const without = await restore(0);
  const fp = await falsePositives();
  const fmt = (xs: number[]) => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`;
  const md = [
    '# Worker health benchmark',
    '',
    `Run ${started} on ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? '?'}, Node ${process.version}; ${ROUNDS} rounds each, medians with (min–max); simulated workers at 10 ms/token, ${CLIENTS} streaming clients of 16-token chats.`,
    '',
    '## A. What probing costs the gateway',
    '',
    '| | median (min–max) |',
    '|---|---|',
    `| gateway CPU per probe (25 ms interval × 4 workers, idle, against health off) | ${fmt(a.cpuPerProbeUs)} µs |`,
    `| request latency p50, probes every 250 ms per worker / health off | ${fmt(a.latency.map((x) => x.on.p50))} / ${fmt(a.latency.map((x) => x.off.p50))} ms |`,
    `| request latency p99, probes every 250 ms per worker / health off | ${fmt(a.latency.map((x) => x.on.p99))} / ${fmt(a.latency.map((x) => x.off.p99))} ms |`,
    '',
    '## B. Detection time per fault (probes every 2 s, jitter 0.2; fault injected at a random moment of the cycle)',
    '',
    '| fault | caught by | acted on as | ms from injection, median (min–max) |',
    '|---|---|---|---|',
    ...FAULTS.map((f) => `| ${f.kind} | ${f.signal} | ${f.until} | ${fmt(b[f.kind] ?? [])} |`),
    '',
    '## C. Time to capacity restored after kill -9 of a worker',
    '',
    '| | ms from the exit, median (min–max) |',
    '|---|---|',
    `| with a hot spare (exit → spare takes traffic) | ${fmt(withSpare)} |`,
    `| without (exit → replacement started, warmed and admitted by its probes) | ${fmt(without)} |`,
    '',
    '## D. False positives: a healthy fleet under load',
    '',
    `${fp.probes} routine probes of 4 healthy workers under ${CLIENTS} streaming clients in ${fp.seconds.toFixed(0)} s (probes every 20 ms per worker): **${fp.drains} drain(s)**, ${fp.suspicions} suspicion(s) (false-suspicion rate ${(fp.suspicions / fp.probes).toExponential(2)} per probe), ${fp.inconclusive} inconclusive (the worker saturated: nothing concluded).`,
    '',
  ].join('\n');
  mkdirSync(path.join(root, 'bench/results'), { recursive: true });
  writeFileSync(path.join(root, 'bench/results/health.md'), md);
  writeFileSync(
    path.join(root, 'bench/results/health.json'),
    JSON.stringify({ started, overhead: a, detection: b, restore: { withSpare, without }, falsePositives: fp }, null, 2) + '\n',
  );
  console.log(md);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
