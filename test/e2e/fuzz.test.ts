// Hostile and broken clients (issue 12): mutated and generated request heads, chunked bodies, JSON
// bodies and connection behaviours against a running `glidepath up` (data plane and admin API) for
// a bounded time. Guards: no crash, no 5xx for a client fault, valid requests still answered,
// RSS bounded, other clients served within a latency bound. `npm test` runs the short profile
// (seconds); `npm run fuzz` the long one (FUZZ_SECONDS, FUZZ_SEED, FUZZ_CASE… in test/fuzz/harness.ts).
// Needs dist/ (`npm test` builds it first; a direct vitest run needs `npm run build`).
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  crashLines,
  describeFailures,
  describeObservations,
  MODEL,
  runFuzz,
  settingsFromEnv,
  startFuzzGateway,
  stopFuzzGateway,
  summary,
} from '../fuzz/harness.js';
import type { FuzzGateway, RunResult } from '../fuzz/harness.js';
import { KNOWN_DEFECTS } from '../fuzz/judge.js';

const settings = settingsFromEnv();
const p = settings.profile;
const runBoundMs = p.seconds * 1000 + p.timing.caseMs + p.timing.closeMs + p.scale.holdMs + 60_000;

let gw: FuzzGateway | undefined;
let run: RunResult;

describe(`hostile and broken clients: fuzzed requests against a running gateway (${p.name} profile)`, () => {
  beforeAll(async () => {
    gw = await startFuzzGateway(p.scale);
    run = await runFuzz(gw, settings);
    console.log(summary(run));
    if (run.known.length > 0) {
      const ids = new Set(run.known.flatMap((f) => f.problems.map((x) => x.known)));
      const defects = KNOWN_DEFECTS.filter((d) => ids.has(d.id)).map((d) => `  ${d.id}: ${d.what}\n    at ${d.where}`);
      console.log(`known defects (failures only with FUZZ_STRICT=1):\n${defects.join('\n')}\n${describeFailures(run, run.known, 3)}`);
    }
    if (run.observations.size > 0) console.log(`RFC observations (not failures):\n${describeObservations(run)}`);
  }, runBoundMs);

  afterAll(async () => {
    await stopFuzzGateway(gw);
  }, 30_000);

  it('no client fault gets a 5xx (but 505/501), valid requests get a 2xx, surely invalid ones a 4xx, and every connection is answered or closed', () => {
    const list = settings.strict ? [...run.failures, ...run.known] : run.failures;
    expect(list.length, `${list.length} failing case(s):\n${describeFailures(run, list)}`).toBe(0);
  });

  it('the gateway does not crash: still running, still serving /health and a chat completion, no stack trace on its stderr', async () => {
    const up = gw!.up;
    expect(run.died, 'the gateway exited during the run').toBe(false);
    expect(up.proc.exitCode).toBeNull();
    expect(up.proc.signalCode).toBeNull();
    const h = await request(`${up.dataUrl}/health`);
    expect(h.statusCode).toBe(200);
    await h.body.text();
    const c = await request(`${up.dataUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 2 }),
    });
    expect(c.statusCode).toBe(200);
    await c.body.text();
    expect(crashLines(up.stderr())).toEqual([]);
  });

  it(`memory stays bounded: peak RSS within ${p.rssBoundMiB} MiB of the warmed-up baseline`, () => {
    if (!run.rss.available) return; // no /proc: nothing to measure
    const over = run.rss.peakMiB - run.rss.baselineMiB;
    expect(
      over,
      `peak ${run.rss.peakMiB.toFixed(0)} MiB over a baseline of ${run.rss.baselineMiB.toFixed(0)} MiB; in flight at the highest sample:\n  ${run.rss.peakCases.join('\n  ')}`,
    ).toBeLessThanOrEqual(p.rssBoundMiB);
  });

  it(`other clients are still served: every canary request succeeds, on one keep-alive connection, p99 under ${p.canaryP99Ms} ms`, () => {
    const c = run.canary;
    expect(c.errors, 'canary requests that failed').toEqual([]);
    expect(c.requests).toBeGreaterThan(0);
    expect(c.connections, 'the gateway closed the canary keep-alive connection').toBe(1);
    expect(
      c.p99Ms,
      `canary p99 (the test process's own event-loop delay p99 was ${run.loop.p99Ms.toFixed(1)} ms); in flight when the slowest (${c.maxMs.toFixed(0)} ms) started:\n  ${c.slowestDuring.join('\n  ')}`,
    ).toBeLessThan(p.canaryP99Ms);
  });

  it('shuts down cleanly afterwards: SIGTERM, exit code 0, still no stack trace', async () => {
    const up = gw!.up;
    const exit = await stopFuzzGateway(gw);
    gw = undefined;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(crashLines(up.stderr())).toEqual([]);
  });
});
