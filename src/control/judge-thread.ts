// The canary judge off the gateway's event loop: one worker thread per App computes every look (a
// look over full windows — 5,000 samples per version — costs ~25 ms of CPU: sorting, Mann-Whitney,
// Hodges-Lehmann). The loop only packs the samples (a memcpy per series, transferred, not cloned)
// and awaits the verdict, so its delay stays under a millisecond (bench/canary-look.ts).
//
// Why a thread and not incremental statistics or yielding: the verdict must stay the same function
// of the same numbers (a test compares it with the in-process judge), and the expensive parts
// (rank tests, the Hodges-Lehmann interval over n·m differences) do not split into slices under
// 1 ms without rewriting them; a thread keeps the statistics as they are, verified against SciPy.
//
// The worker is started on the first look and unref'd (it never keeps the process alive). If it
// cannot start — running from the TypeScript sources, where there is no compiled worker — or if it
// dies, the look runs in this thread and a warning says so once.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { judgeInProcess } from '../analysis/judge-packed.js';
import type { JudgeFn, PackedSamples } from '../analysis/judge-packed.js';
import type { Verdict } from '../analysis/judge-types.js';
import type { LookRequest } from './judge-worker.js';

type Answer = { id: number; verdict: Verdict; ms: number } | { id: number; error: string };

export class JudgeThread {
  private worker: Worker | undefined;
  private unavailable = false;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: Verdict) => void; reject: (e: Error) => void }>();
  /** Milliseconds the last look took in the worker (for the bench and logs). */
  lastLookMs = Number.NaN;

  constructor(
    private readonly onWarning: (message: string) => void = () => undefined,
    private readonly script: URL = new URL('./judge-worker.js', import.meta.url),
  ) {}

  /** The JudgeFn to give the canary controller. */
  readonly judge: JudgeFn = (stable, canary, cfg, look) => {
    const w = this.ensure();
    if (!w) return judgeInProcess(stable, canary, cfg, look);
    return new Promise<Verdict>((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { resolve, reject });
      const msg: LookRequest = { id, stable, canary, cfg, look };
      w.postMessage(msg, transferables(stable, canary));
      if (this.pending.size === 1) w.ref(); // while a look is out, the thread is real work
    });
  };

  /** Whether looks run in the worker thread (false: in this thread). */
  get threaded(): boolean {
    return this.ensure() !== undefined;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.unavailable = true;
    for (const p of this.pending.values()) p.reject(new Error('the judge thread was closed'));
    this.pending.clear();
    if (w) await w.terminate();
  }

  private ensure(): Worker | undefined {
    if (this.worker || this.unavailable) return this.worker;
    if (!existsSync(fileURLToPath(this.script))) {
      this.unavailable = true;
      this.onWarning(`canary looks run on the event loop: no compiled judge worker at ${fileURLToPath(this.script)} (running from sources?)`);
      return undefined;
    }
    const w = new Worker(this.script);
    w.unref();
    w.on('message', (a: Answer) => {
      const p = this.pending.get(a.id);
      if (!p) return;
      this.pending.delete(a.id);
      if (this.pending.size === 0) w.unref();
      if ('error' in a) p.reject(new Error(`canary judge: ${a.error}`));
      else {
        this.lastLookMs = a.ms;
        p.resolve(a.verdict);
      }
    });
    const fail = (why: string): void => {
      if (this.worker !== w) return;
      this.worker = undefined;
      this.unavailable = true;
      this.onWarning(`canary looks run on the event loop from now on: the judge thread ${why}`);
      for (const p of this.pending.values()) p.reject(new Error(`the judge thread ${why}`));
      this.pending.clear();
    };
    w.on('error', (err) => fail(`failed: ${err.message}`));
    w.on('exit', (code) => fail(`exited (code ${code})`));
    this.worker = w;
    return w;
  }
}

function transferables(...ps: PackedSamples[]): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const p of ps) for (const a of [p.ttftMs, p.tpotMs, p.latencyMs, p.quality]) if (a && a.buffer instanceof ArrayBuffer) out.push(a.buffer);
  return out;
}
