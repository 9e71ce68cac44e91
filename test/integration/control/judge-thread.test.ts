// The canary judge's worker thread (the compiled worker in dist/, as `glidepath up` runs it): the same
// verdict as the judge on this thread, number for number, across looks; and a judge that cannot run
// in a thread falls back to this one, saying so once.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { judgeConfig } from '../../../src/analysis/judge.js';
import { judgeInProcess } from '../../../src/analysis/judge-packed.js';
import type { PackedSamples } from '../../../src/analysis/judge-packed.js';
import { JudgeThread } from '../../../src/control/judge-thread.js';
import { mulberry32 } from '../../../src/domain/random.js';
import { ROOT, ensureBuilt } from '../../helpers/e2e-up.js';

const WORKER = pathToFileURL(path.join(ROOT, 'dist/control/judge-worker.js'));

function samples(seed: number, n: number, scale: number, errors: number): PackedSamples {
  const u = mulberry32(seed);
  const series = (mu: number) =>
    Float64Array.from({ length: n }, () => Math.exp(mu + 0.4 * Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u())) * scale);
  return {
    ttftMs: series(3.5),
    tpotMs: series(2.7),
    latencyMs: series(5.5),
    quality: Float64Array.from({ length: n }, () => u()),
    requests: n,
    errors,
    durationS: 60,
    outputTokens: n * 50,
  };
}
const copy = (p: PackedSamples): PackedSamples => ({
  ...p,
  ttftMs: p.ttftMs.slice(),
  tpotMs: p.tpotMs.slice(),
  latencyMs: p.latencyMs.slice(),
  quality: p.quality?.slice(),
});

const threads: JudgeThread[] = [];
afterEach(async () => {
  for (const t of threads.splice(0)) await t.close();
});

describe('the judge thread', () => {
  it('gives the verdict the judge gives on this thread, look after look (the p-values carry over)', async () => {
    ensureBuilt();
    const warnings: string[] = [];
    const t = new JudgeThread((m) => warnings.push(m), WORKER);
    threads.push(t);
    expect(t.threaded).toBe(true);
    const cfg = judgeConfig();
    let prevA: Record<string, number> = {};
    let prevB: Record<string, number> = {};
    for (const [i, [n, scale, errors]] of [
      [300, 1, 0],
      [1200, 1.05, 3],
      [5000, 1.3, 40],
    ].entries()) {
      const stable = samples(10 + i, 5000, 1, 2);
      const canary = samples(20 + i, n!, scale!, errors!);
      const here = await judgeInProcess(copy(stable), copy(canary), cfg, { index: i, previous: prevA });
      const there = await t.judge(copy(stable), copy(canary), cfg, { index: i, previous: prevB });
      expect(there).toEqual(here);
      prevA = here.sequentialPValues;
      prevB = there.sequentialPValues;
    }
    expect(Number.isFinite(t.lastLookMs)).toBe(true);
    expect(warnings).toEqual([]);
  });

  it('without a compiled worker (running from sources) it judges on this thread and warns once', async () => {
    const warnings: string[] = [];
    const t = new JudgeThread((m) => warnings.push(m), pathToFileURL('/nonexistent/judge-worker.js'));
    threads.push(t);
    const cfg = judgeConfig();
    const v = await t.judge(samples(1, 200, 1, 0), samples(2, 200, 1, 0), cfg, { index: 0 });
    await t.judge(samples(1, 200, 1, 0), samples(2, 200, 1, 0), cfg, { index: 1 });
    expect(v.outcome).toBeDefined();
    expect(t.threaded).toBe(false);
    expect(warnings).toEqual([expect.stringMatching(/canary looks run on the event loop: no compiled judge worker/)]);
  });

  it('a worker that dies fails the looks it had and the next ones run on this thread', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gp-judge-'));
    const script = path.join(dir, 'worker.mjs');
    writeFileSync(script, "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => process.exit(3));\n");
    const warnings: string[] = [];
    const t = new JudgeThread((m) => warnings.push(m), pathToFileURL(script));
    threads.push(t);
    const cfg = judgeConfig();
    await expect(t.judge(samples(1, 50, 1, 0), samples(2, 50, 1, 0), cfg, { index: 0 })).rejects.toThrow(/judge thread exited \(code 3\)/);
    const v = await t.judge(samples(1, 50, 1, 0), samples(2, 50, 1, 0), cfg, { index: 1 });
    expect(v.outcome).toBe('nodata');
    expect(warnings).toEqual([expect.stringMatching(/from now on: the judge thread exited \(code 3\)/)]);
  });
});
