// End-to-end worker health (docs/health.md): a real `glidepath up` over four simulated workers under
// steady streaming load, probes every 2 s. Each fault of the simulator is caught by the signal meant
// for it and handled as it should be: silent corruption → drained at once and replaced, with no
// corrupt answer reaching a client after detection; a hang → timeouts → breaker → replaced; a 3×
// slowdown → latency spike → half weight, never killed; a crash with a hot spare → the spare serves
// within a second; a flapping worker → held out by its breaker for the recovery timeout; a healthy
// fleet under load → no drain. Health and spares survive a kill -9 of the control plane.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { cleanupAll, collectEvents, ensureBuilt, loadAgent, removeDir, startUp, streamChat, tempDir, trackWorkerPids, writeConfig } from '../helpers/e2e-up.js';
import type { EventLog, UpProcess } from '../helpers/e2e-up.js';
import type { WorkerView as ApiWorkerView } from '../../src/api/types.js';

const MODEL = 'chat';
const INTERVAL = 2_000;
const JITTER = 0.2;
/** The next probe after a fault: at most one interval (with jitter) and the probe's own retries. */
const DETECT_MS = INTERVAL * (1 + JITTER) + 1_500;
const CLIENTS = 8;
/** How long after the gateway wrote a stream's end its client may read it, on a loaded machine (ms). */
const DELIVERY_SLACK_MS = 50;
const PROMPTS = Array.from({ length: 64 }, (_, i) => `tell me about topic ${i}`);

function configYaml(dataDir: string, o: { spares?: number; health?: Record<string, number>; faults?: string } = {}): string {
  const health = { interval_ms: INTERVAL, jitter: JITTER, timeout_ms: 1000, recovery_timeout_ms: 4000, dead_after_failed_recoveries: 1, ...o.health };
  return [
    'server:',
    `  data_dir: ${JSON.stringify(dataDir)}`,
    'gpus: { count: 8, memory_gb: 80 }',
    // a hung worker's requests are retried elsewhere after this long (and count against it)
    'gateway: { first_token_timeout_ms: 2500, idle_timeout_ms: 2000 }',
    'models:',
    `  - name: ${MODEL}`,
    `    health: ${JSON.stringify(health)}`,
    '    versions:',
    '      - id: v1',
    '        replicas: 4',
    ...(o.spares ? [`        spares: ${o.spares}`] : []),
    `        provider: { kind: sim, sim: { seed: 11, inter_token_ms: 10, jitter: 0${o.faults ? `, faults: { ${o.faults} }` : ''} } }`,
    '    route:',
    '      weights: { v1: 1 }',
    '',
  ].join('\n');
}

interface Served {
  ok: boolean;
  worker: string;
  prompt: string;
  text: string;
  /** Epoch ms the request was sent and the response ended (the event stream's clock). */
  startedAt: number;
  endedAt: number;
  error?: string | undefined;
}

/** CLIENTS loops of streamed chats until `stop`. */
function load(up: UpProcess): { served: Served[]; stop(): Promise<void> } {
  const served: Served[] = [];
  const agent = loadAgent(CLIENTS);
  let running = true;
  let n = 0;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (running) {
      const prompt = PROMPTS[n++ % PROMPTS.length] as string;
      const startedAt = Date.now();
      const r = await streamChat(up.dataUrl, { model: MODEL, prompt, maxTokens: 16, dispatcher: agent });
      served.push({ ok: r.ok, worker: r.worker, prompt, text: r.text, startedAt, endedAt: Date.now(), error: r.error });
    }
  });
  return {
    served,
    async stop() {
      running = false;
      await Promise.all(loops);
      await agent.close();
    },
  };
}

const workers = (up: UpProcess) => up.ok<ApiWorkerView[]>('GET', '/workers');

async function fault(up: UpProcess, id: string, body: Record<string, unknown>): Promise<void> {
  const w = (await workers(up)).find((x) => x.id === id);
  if (!w) throw new Error(`no worker ${id}`);
  const res = await request(`${w.endpoint}/admin/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

async function metrics(up: UpProcess): Promise<string> {
  const res = await request(`${up.dataUrl}/metrics`);
  return res.body.text();
}

const healthTo = (worker: string, to: string) => (e: { kind: string; data?: unknown }) =>
  e.kind === 'worker_health' && (e.data as { worker?: string; to?: string } | undefined)?.worker === worker && (e.data as { to: string }).to === to;

/** Until `pred` holds of the workers (polled: the admin API is the observable; each poll is a request). */
async function untilWorkers(up: UpProcess, pred: (ws: ApiWorkerView[]) => boolean, what: string, timeoutMs = 20_000): Promise<ApiWorkerView[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ws = await workers(up);
    if (pred(ws)) return ws;
    if (Date.now() > deadline) throw new Error(`workers never ${what}: ${JSON.stringify(ws.map((w) => [w.id, w.role, w.health?.state, w.weight]))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The text a healthy v1 worker gives each prompt (temperature 0: a pure function of seed and prompt). */
async function referenceTexts(up: UpProcess, from: string): Promise<Map<string, string>> {
  const w = (await workers(up)).find((x) => x.id === from) as ApiWorkerView;
  const out = new Map<string, string>();
  for (const p of PROMPTS) {
    const r = await streamChat(w.endpoint, { model: MODEL, prompt: p, maxTokens: 16 });
    out.set(p, r.text);
  }
  return out;
}

let dirs: string[] = [];
const ups: UpProcess[] = [];
const logs: EventLog[] = [];

beforeAll(() => ensureBuilt());
afterAll(async () => {
  for (const l of logs) l.stop();
  // workers started after `up` came up (replacements, spares) are known only to it: ask before it goes
  for (const up of ups)
    trackWorkerPids(
      await workers(up).then(
        (ws) => ws.map((w) => w.pid),
        () => [],
      ),
    );
  cleanupAll();
  for (const d of dirs) removeDir(d);
  dirs = [];
});

async function start(label: string, o: Parameters<typeof configYaml>[1] = {}): Promise<{ up: UpProcess; log: EventLog; dir: string }> {
  const dir = tempDir(`health-${label}`);
  dirs.push(dir);
  const file = writeConfig(dir, configYaml(`${dir}/state`, o));
  const up = await startUp({ configFile: file, dataDir: `${dir}/state` });
  ups.push(up);
  const log = collectEvents(up);
  logs.push(log);
  return { up, log, dir };
}

describe('worker health (e2e, real glidepath up, 4 simulated workers, probes every 2 s)', () => {
  it('a worker turning corrupt mid-run is caught by its next probe, drained and replaced; no client gets a corrupt answer after detection', async () => {
    const { up, log } = await start('corrupt');
    const l = load(up);
    await log.waitFor((e) => e.kind === 'probe_set_recorded', 'probe_set_recorded');
    await untilWorkers(up, (ws) => ws.every((w) => w.health?.baseline_ms !== null && w.health?.baseline_ms !== undefined), 'probed');
    const bad = 'chat/v1/2';
    const t0 = Date.now();
    await fault(up, bad, { corrupt: true });
    const caught = await log.waitFor(healthTo(bad, 'draining'), `${bad} draining`);
    const detectMs = caught.at - t0;
    expect(detectMs).toBeLessThanOrEqual(DETECT_MS);
    await log.waitFor((e) => e.kind === 'worker_replaced', 'worker_replaced');
    const after = await untilWorkers(
      up,
      (ws) => ws.filter((w) => w.health?.state === 'healthy' && w.weight === 1).length === 4 && !ws.some((w) => w.id === bad),
      'back to four healthy',
    );
    await l.stop();
    const ref = await referenceTexts(up, after[0]!.id);
    // every answer to a request sent after detection is a healthy one; before it, the bad worker's differ
    const late = l.served.filter((s) => s.ok && s.startedAt > caught.at);
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((s) => s.text !== ref.get(s.prompt))).toEqual([]);
    expect(late.filter((s) => s.worker === bad)).toEqual([]);
    // the bad worker's streams in flight at detection were cut off: one that ended whole was written out
    // before the drain, and only its reading by the client may come after the event's timestamp (a
    // stream left to run would have gone on for up to 16 tokens × 10 ms)
    const straddling = l.served.filter((s) => s.ok && s.worker === bad && s.startedAt <= caught.at && s.endedAt > caught.at + DELIVERY_SLACK_MS);
    expect(straddling).toEqual([]);
    expect(l.served.filter((s) => s.ok && s.endedAt > caught.at && s.worker !== bad && s.text !== ref.get(s.prompt))).toEqual([]);
    expect(l.served.filter((s) => s.ok && s.worker === bad && s.endedAt < t0).every((s) => s.text === ref.get(s.prompt))).toBe(true);
    // counted (the alert SilentCorruptionDetected reads this)
    expect(await metrics(up)).toMatch(/glidepath_health_probe_failures_total\{model="chat",version="v1",reason="token_mismatch"\} [1-9]/);
    // the only failures are the corrupt worker's streams in flight at detection, cut off rather than finished with garbage
    const failed = l.served.filter((s) => !s.ok);
    expect(failed.length).toBeLessThanOrEqual(CLIENTS);
    console.log(`health e2e corrupt: detected in ${detectMs} ms (limit ${DETECT_MS}); ${l.served.length} requests, ${failed.length} cut off at detection`);
  }, 90_000);

  it('a hung worker is caught by timeouts, held out, then given up and replaced', async () => {
    const { up, log } = await start('hang');
    const l = load(up);
    await untilWorkers(up, (ws) => ws.every((w) => w.health?.baseline_ms != null), 'probed');
    const bad = 'chat/v1/1';
    const t0 = Date.now();
    await fault(up, bad, { hang: true });
    const open = await log.waitFor(healthTo(bad, 'unhealthy'), `${bad} unhealthy`);
    expect(open.at - t0).toBeLessThanOrEqual(DETECT_MS + 3_000);
    await log.waitFor((e) => e.kind === 'worker_replaced', 'worker_replaced', 30_000);
    await untilWorkers(
      up,
      (ws) => ws.filter((w) => w.health?.state === 'healthy' && w.weight === 1).length === 4 && !ws.some((w) => w.id === bad),
      'back to four healthy',
      30_000,
    );
    await l.stop();
    expect(l.served.filter((s) => s.ok && s.worker === bad && s.endedAt > open.at)).toEqual([]);
    console.log(`health e2e hang: unhealthy after ${open.at - t0} ms; ${l.served.filter((s) => !s.ok).length} of ${l.served.length} requests failed`);
  }, 90_000);

  it('a 3× slowdown is caught as a latency spike: half weight, never killed; health and spares survive a kill -9 of up', async () => {
    const { up, log, dir } = await start('slow', { spares: 1 });
    const l = load(up);
    await untilWorkers(up, (ws) => ws.every((w) => w.health?.state === 'healthy' && w.health.baseline_ms != null), 'probed');
    const slow = 'chat/v1/0';
    await fault(up, slow, { latency_multiplier: 3 });
    const sus = await log.waitFor(healthTo(slow, 'suspicious'), `${slow} suspicious`);
    expect((sus.data as { lastFailure: { reason: string } }).lastFailure.reason).toMatch(/latency_spike|ttft_outlier/);
    await untilWorkers(up, (ws) => ws.find((w) => w.id === slow)?.weight === 0.5, 'half weight');
    // three more intervals: still serving at half weight, never unhealthy, never stopped
    await new Promise((r) => setTimeout(r, 3 * INTERVAL));
    await l.stop();
    expect(
      log.events.filter(
        (e) => (e.data as { worker?: string } | undefined)?.worker === slow && /unhealthy|draining|dead/.test(String((e.data as { to?: string }).to)),
      ),
    ).toEqual([]);
    const before = await workers(up);
    expect(before.find((w) => w.id === slow)).toMatchObject({ weight: 0.5, health: { state: 'suspicious' } });
    expect(before.filter((w) => w.role === 'spare')).toHaveLength(1);
    trackWorkerPids(before.map((w) => w.pid));
    // kill -9 the control plane: the workers live on; the restarted one adopts them with their health, breaker and roles
    await up.kill('SIGKILL');
    const up2 = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
    ups.push(up2);
    const after = await workers(up2);
    expect(after.map((w) => [w.id, w.role, w.health?.state, w.health?.breaker, w.weight])).toEqual(
      before.map((w) => [w.id, w.role, w.health?.state, w.health?.breaker, w.weight]),
    );
    expect(after.map((w) => w.pid)).toEqual(before.map((w) => w.pid));
  }, 90_000);

  it('a crash with a hot spare: the spare takes traffic within a second, and a new spare is started', async () => {
    const { up, log } = await start('crash', { spares: 1 });
    const l = load(up);
    const ws = await untilWorkers(up, (x) => x.length === 5 && x.every((w) => w.health?.state === 'healthy'), 'all healthy');
    const spare = ws.find((w) => w.role === 'spare') as ApiWorkerView;
    const victim = ws.find((w) => w.role === 'serving') as ApiWorkerView;
    process.kill(victim.pid!, 'SIGKILL');
    const exited = await log.waitFor((e) => e.kind === 'worker_exited', 'worker_exited');
    const promoted = await log.waitFor((e) => e.kind === 'spare_promoted', 'spare_promoted');
    const restoreMs = promoted.at - exited.at;
    expect(restoreMs).toBeLessThan(1_000);
    await untilWorkers(up, (x) => x.find((w) => w.id === spare.id)?.weight === 1, 'spare serving');
    await log.waitFor((e) => e.kind === 'spare_started', 'spare_started');
    await untilWorkers(
      up,
      (x) => x.filter((w) => w.role === 'spare' && w.health?.state === 'healthy').length === 1 && x.filter((w) => w.role === 'serving').length === 4,
      'a new spare',
    );
    const servedBySpare = l.served.filter((s) => s.ok && s.worker === spare.id).length;
    await l.stop();
    expect(servedBySpare).toBeGreaterThan(0);
    console.log(`health e2e crash: capacity back ${restoreMs} ms after the exit (spare ${spare.id} promoted)`);
  }, 90_000);

  it('a flapping worker (errs every other probe interval) is held out by its breaker for the recovery timeout, not flipped in and out', async () => {
    const { up, log } = await start('flap', { health: { recovery_timeout_ms: 8000, dead_after_failed_recoveries: 5 } });
    const l = load(up);
    await untilWorkers(up, (ws) => ws.every((w) => w.health?.baseline_ms != null), 'probed');
    const flap = 'chat/v1/3';
    await fault(up, flap, { flap_ms: INTERVAL });
    const open = await log.waitFor(healthTo(flap, 'unhealthy'), `${flap} unhealthy`, 30_000);
    // held out: its next change comes when the recovery timeout has passed, not at the next good probe
    const next = await log.waitFor(
      (e) => e.kind === 'worker_health' && e.at > open.at && (e.data as { worker?: string }).worker === flap,
      'the next change',
      20_000,
    );
    await l.stop();
    expect(next.at - open.at).toBeGreaterThanOrEqual(8_000 - 50);
    expect(l.served.filter((s) => s.ok && s.worker === flap && s.endedAt > open.at + 200 && s.endedAt < open.at + 8_000)).toEqual([]);
  }, 90_000);

  it('false positives: a healthy fleet probed 1,000 times under load is never drained; the false-suspicion rate is reported', async () => {
    const { up, log } = await start('calm', { health: { interval_ms: 40 } });
    const l = load(up);
    const probes = async () => {
      const m = await metrics(up);
      let n = 0;
      for (const x of m.matchAll(/glidepath_health_probes_total\{[^}]*check="routine"[^}]*\} (\d+)/g)) n += Number(x[1]);
      return n;
    };
    const deadline = Date.now() + 60_000;
    while ((await probes()) < 1_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    await l.stop();
    const n = await probes();
    expect(n).toBeGreaterThanOrEqual(1_000);
    const changes = log.events.filter((e) => e.kind === 'worker_health');
    expect(changes.filter((e) => /unhealthy|draining|dead/.test(String((e.data as { to?: string }).to)))).toEqual([]);
    const suspicions = changes.filter((e) => (e.data as { to?: string }).to === 'suspicious').length;
    console.log(`health e2e false positives: ${n} probes under load, 0 drains, ${suspicions} suspicion(s) (rate ${(suspicions / n).toExponential(2)})`);
    expect(l.served.filter((s) => !s.ok)).toEqual([]);
  }, 90_000);
});
