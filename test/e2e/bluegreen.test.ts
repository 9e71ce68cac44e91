// End-to-end blue-green under load: a real `glidepath up` with a simulated fleet, 100 concurrent
// streaming clients, and deploy green → swap (overlap) → rollback → swap (drain-first) while they
// run. Nothing may fail, no response may mix two versions, and every request sent after a switch
// returned must be served by the version that switch named.
//
// How mixing is detected: the simulator's text at temperature 0 is a pure function of (version
// seed, prompt). After the run every prompt used is asked of each version's worker directly; every
// response must equal exactly one version's text, and that version must be its header's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import type { Agent } from 'undici';
import {
  cleanupAll,
  ensureBuilt,
  loadAgent,
  mapLimit,
  removeDir,
  simConfigYaml,
  startUp,
  streamChat,
  tempDir,
  trackWorkerPids,
  writeConfig,
} from '../helpers/e2e-up.js';
import type { StreamResult, UpProcess, WorkerView } from '../helpers/e2e-up.js';

const MODEL = 'chat';
const CLIENTS = 100;
const MAX_TOKENS = 32;
const INTER_TOKEN_MS = 5;
/**
 * Before each overlap switch a long stream (ignore_eos) is started and its headers awaited, so it is
 * certainly on blue and still streaming when the switch happens, however slow the machine is.
 */
const LONG_TOKENS = 600;
/** Distinct prompts, used in turn: each request's prompt differs from the previous ~500. */
const PROMPTS = 512;
/** Completed requests sent after a step's admin call returned, before the next step. */
const PER_STEP = 200;
/** Hard cap on requests, so the load stops by itself whatever happens. */
const MAX_REQUESTS = 20_000;

interface Rec extends StreamResult {
  prompt: string;
  client: number;
  long: boolean;
}

const requestOf = (p: string, long: boolean) => ({
  model: MODEL,
  prompt: p,
  maxTokens: long ? LONG_TOKENS : MAX_TOKENS,
  extra: long ? { ignore_eos: true } : {},
});
/** What the reference texts are keyed by: the same prompt asked long or short has different answers. */
const keyOf = (r: { prompt: string; long: boolean }) => `${r.long ? 'long' : 'short'}|${r.prompt}`;

interface Step {
  label: string;
  /** Version every request sent after `doneAt` must be served by. */
  target: string;
  /** performance.now() when the admin call began and when it returned. */
  calledAt: number;
  doneAt: number;
  result: unknown;
}

const prompt = (i: number) => `Request ${i % PROMPTS}: continue the story of the lighthouse keeper, part ${(i * 7919) % PROMPTS}.`;

/** Continuous load: `CLIENTS` loops streaming one completion after another until stopped. */
class Load {
  readonly records: Rec[] = [];
  private sent = 0;
  private stopped = false;
  private readonly watchers: { pred: () => boolean; resolve: () => void; reject: (e: Error) => void }[] = [];
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly base: string,
    private readonly agent: Agent,
  ) {}

  start(): void {
    for (let c = 0; c < CLIENTS; c++) this.loops.push(this.client(c));
  }

  private async client(c: number): Promise<void> {
    while (!this.stopped && this.sent < MAX_REQUESTS) {
      const p = prompt(this.sent++);
      const r = await streamChat(this.base, { ...requestOf(p, false), dispatcher: this.agent });
      this.records.push({ ...r, prompt: p, client: c, long: false });
      this.check();
    }
    this.stopped = true;
    this.check();
  }

  private check(): void {
    for (let i = this.watchers.length - 1; i >= 0; i--) {
      const w = this.watchers[i]!;
      if (w.pred()) {
        this.watchers.splice(i, 1);
        w.resolve();
      } else if (this.stopped) {
        this.watchers.splice(i, 1);
        w.reject(new Error(`load stopped after ${this.records.length} requests before the condition held`));
      }
    }
  }

  /** Resolve once `n` requests sent after `since` have completed. */
  completedAfter(since: number, n: number): Promise<void> {
    const pred = () => this.records.filter((r) => r.startedAt > since).length >= n;
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => this.watchers.push({ pred, resolve, reject }));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }
}

describe('blue-green under load (e2e, real glidepath up)', () => {
  let dir = '';
  let up: UpProcess | undefined;
  let agent: Agent | undefined;

  beforeAll(() => {
    ensureBuilt();
    dir = tempDir('bluegreen');
  });

  afterAll(async () => {
    await agent?.close();
    if (up) {
      trackWorkerPids((await up.ok<WorkerView[]>('GET', '/workers').catch(() => [] as WorkerView[])).map((w) => w.pid));
      await up.kill('SIGTERM');
    }
    cleanupAll();
    removeDir(dir);
  });

  it('given 100 streaming clients, when deploy green → swap overlap → rollback → swap drain-first, then nothing fails, nothing mixes, and every request after a switch is served by its target', async () => {
    const t0 = performance.now();
    // given: v1 (seed 1) serving, v2 (seed 2) registered, a fleet of simulators pacing tokens
    const cfg = writeConfig(
      dir,
      simConfigYaml({
        model: MODEL,
        dataDir: `${dir}/data`,
        versions: [
          { id: 'v1', seed: 1, replicas: 2, interTokenMs: INTER_TOKEN_MS },
          { id: 'v2', seed: 2, replicas: 2, interTokenMs: INTER_TOKEN_MS },
        ],
      }),
    );
    up = await startUp({ configFile: cfg, dataDir: `${dir}/data` });
    const u = up;
    agent = loadAgent(CLIENTS + 20);
    const load = new Load(u.dataUrl, agent);
    load.start();
    await load.completedAfter(0, PER_STEP);

    const steps: Step[] = [];
    const step = async (label: string, target: string, method: string, p: string, body: unknown) => {
      const calledAt = performance.now();
      const result = await u.ok(method, p, body);
      const s: Step = { label, target, calledAt, doneAt: performance.now(), result };
      steps.push(s);
      await load.completedAfter(s.doneAt, PER_STEP);
      return s;
    };

    /** Start a long stream through the gateway and resolve once its headers say which version serves it. */
    const straddler = async (label: string): Promise<{ version: string; done: Promise<Rec> }> => {
      const p = `Straddle ${label}: tell the whole story of the lighthouse keeper.`;
      let served: (v: string) => void = () => undefined;
      const headers = new Promise<string>((resolve) => (served = resolve));
      const done = streamChat(u.dataUrl, { ...requestOf(p, true), dispatcher: agent, onHeaders: served }).then((r) => ({
        ...r,
        prompt: p,
        client: -1,
        long: true,
      }));
      const version = await Promise.race([headers, done.then((r) => Promise.reject(new Error(`straddler ${label} ended before its headers: ${r.error}`)))]);
      return { version, done };
    };

    // when
    const deploy = await step('deploy green v2', 'v1', 'POST', `/models/${MODEL}/deploy`, { version: 'v2' });
    const straddle1 = await straddler('swap overlap');
    const swap1 = await step('swap overlap → v2', 'v2', 'POST', `/models/${MODEL}/swap`, { mode: 'overlap' });
    const straddle2 = await straddler('rollback');
    const rb = await step('rollback → v1', 'v1', 'POST', `/models/${MODEL}/rollback`, {});
    // (the first straddler is on v1: let it finish so the drain-first swap does not wait for it)
    const straddled = [await straddle1.done];
    const swap2 = await step('swap drain-first → v2', 'v2', 'POST', `/models/${MODEL}/swap`, { to: 'v2', mode: 'drain-first' });
    straddled.push(await straddle2.done);
    await load.stop();
    const loadDoneAt = performance.now();

    // the control plane's own account of each step
    expect(deploy.result).toMatchObject({ version: 'v2', status: 'ready', weight: 0 });
    expect(swap1.result).toMatchObject({ from: 'v1', to: 'v2', mode: 'overlap' });
    expect(rb.result).toMatchObject({ rolled_back_to: 'v1', rolled_back_from: 'v2', method: 'instant_route_switch' });
    expect(swap2.result).toMatchObject({ from: 'v1', to: 'v2', mode: 'drain-first', drain: { aborted: 0 } });
    // drain-first really waited for blue's in-flight streams (there are always some under this load)
    expect((swap2.result as { drain: { drained: number } }).drain.drained).toBeGreaterThan(0);
    const status = await u.ok<{ models: { active: string; standby: string | null; route: { weights: Record<string, number> } }[] }>('GET', '/status');
    expect(status.models[0]).toMatchObject({ active: 'v2', standby: 'v1', route: { weights: { v2: 1, v1: 0 } } });

    const recs = load.records;
    // then: zero failed client requests
    const failed = recs.filter((r) => !r.ok);
    expect(failed.map((r) => `${r.prompt} → ${r.error}`).slice(0, 5)).toEqual([]);
    expect(recs.length).toBeGreaterThanOrEqual(5 * PER_STEP);

    // reference texts: every prompt used, asked of each version's worker directly
    const workers = await u.ok<WorkerView[]>('GET', `/workers?model=${MODEL}`);
    const urlOf = (v: string) => {
      const w = workers.find((x) => x.version === v);
      if (!w) throw new Error(`no worker for ${v}`);
      return w.endpoint;
    };
    const asked = [...new Map([...recs, ...straddled].map((r) => [keyOf(r), { prompt: r.prompt, long: r.long }])).values()];
    const expected = new Map<string, Map<string, string>>();
    for (const v of ['v1', 'v2']) {
      const base = urlOf(v);
      const texts = await mapLimit(asked, 100, async (q) => {
        const r = await streamChat(base, { ...requestOf(q.prompt, q.long), dispatcher: agent });
        if (!r.ok) throw new Error(`reference ${v} for ${q.prompt}: ${r.error}`);
        return r.text;
      });
      expected.set(v, new Map(asked.map((q, i) => [keyOf(q), texts[i]!])));
    }
    // the check can tell the versions apart: no prompt has the same text under both
    const same = asked.filter((q) => expected.get('v1')!.get(keyOf(q)) === expected.get('v2')!.get(keyOf(q)));
    expect(same).toEqual([]);

    // then: every response is exactly one version's text, and that version is its header's
    const mixed: string[] = [];
    for (const r of [...recs, ...straddled]) {
      const matches = ['v1', 'v2'].filter((v) => expected.get(v)!.get(keyOf(r)) === r.text);
      if (matches.length !== 1 || matches[0] !== r.version)
        mixed.push(`${r.prompt}: header ${r.version}, text matches [${matches.join(',')}]: ${JSON.stringify(r.text)}`);
    }
    expect(mixed.slice(0, 5)).toEqual([]);

    // then: every request sent after a step returned was served by that step's target. The gateway
    // routes a request somewhere between the client sending it and the response headers arriving,
    // so a request whose [sent, headers] interval overlaps a step's admin call may go either way;
    // every other request has exactly one allowed version.
    const allowed = (r: Rec): string[] => {
      let inForce = 'v1';
      const out = new Set<string>();
      for (const s of steps) {
        if (s.doneAt <= r.startedAt) inForce = s.target;
        else if (s.calledAt <= r.headersAt) out.add(s.target);
      }
      out.add(inForce);
      return [...out];
    };
    const wrong = recs.filter((r) => !allowed(r).includes(r.version));
    const stepTimes = steps.map((s) => `${s.label} ${(s.calledAt - t0).toFixed(1)}–${(s.doneAt - t0).toFixed(1)} ms`).join('; ');
    expect(
      wrong
        .map(
          (r) =>
            `${r.prompt}: sent ${(r.startedAt - t0).toFixed(1)} ms, headers ${(r.headersAt - t0).toFixed(1)} ms, served by ${r.version} (${r.worker}), allowed ${allowed(r).join('|')}`,
        )
        .slice(0, 5),
      `${wrong.length} request(s) served by the wrong version; steps: ${stepTimes}`,
    ).toEqual([]);
    const strict = recs.filter((r) => allowed(r).length === 1).length;
    expect(strict).toBeGreaterThanOrEqual(5 * PER_STEP);
    // and each step was checked on at least PER_STEP requests sent after it and answered before the next
    steps.forEach((s, i) => {
      const next = steps[i + 1];
      const strictly = recs.filter((r) => r.startedAt >= s.doneAt && (next === undefined || r.headersAt < next.calledAt));
      expect(strictly.length, `requests sent after "${s.label}" returned and answered before the next step`).toBeGreaterThanOrEqual(PER_STEP);
    });

    // overlap: a stream already on blue when the call began, still streaming when it returned,
    // finished on blue, complete and unmixed (checked above), while new requests went to green
    for (const [s, r, blue] of [
      [swap1, straddled[0]!, 'v1'],
      [rb, straddled[1]!, 'v2'],
    ] as const) {
      expect(r, `stream across "${s.label}" (${stepTimes})`).toMatchObject({ ok: true, version: blue });
      expect(r.headersAt).toBeLessThan(s.calledAt);
      expect(r.endedAt, `stream across "${s.label}" ended ${(r.endedAt - t0).toFixed(0)} ms (${stepTimes})`).toBeGreaterThan(s.doneAt);
    }
    // the load's own streams crossing the overlap switches (evidence, not asserted: depends on timing)
    const crossing = [swap1, rb].map((s) => recs.filter((r) => r.headersAt < s.calledAt && r.endedAt > s.doneAt).length);

    const byVersion = (v: string) => recs.filter((r) => r.version === v).length;
    // one line of evidence for the report (visible with --reporter=verbose)
    console.log(
      `bluegreen e2e: ${recs.length} requests (${byVersion('v1')} v1, ${byVersion('v2')} v2; load streams crossing the overlap switches ${crossing.join(', ')}), ${asked.length} distinct requests, 0 failed; ` +
        `steps at ${steps.map((s) => `${s.label} ${(s.doneAt - t0).toFixed(0)} ms`).join(', ')}; ` +
        `rollback elapsed_ms ${(rb.result as { elapsed_ms: number }).elapsed_ms.toFixed(4)}; ` +
        `drain-first held ${(swap2.result as { held_ms: number }).held_ms.toFixed(1)} ms; load ${(loadDoneAt - t0).toFixed(0)} ms, total ${(performance.now() - t0).toFixed(0)} ms`,
    );
  }, 90_000);
});
