// The simulator's public API: start one simulated vLLM worker (or a fleet) in-process.
import type { EventEmitter } from 'node:events';
import type { FaultKind } from './metrics.js';
export type { FaultKind } from './metrics.js';
import { resolveOptions, type SimFaultSpec, type SimStartOptions } from './options.js';
import { SimServer } from './server.js';
import { warmUp } from './warmup.js';
import type { Clock } from './timing.js';

export type { SimFaultSpec, SimOptions, SimStartOptions, ExitMode } from './options.js';
export { markedShare, isMarkedWord, MARKED_WORDS } from './vocab.js';
export { judgeScore, judgePair, judgeReply, TIE_MARGIN, type PairwiseVerdict } from './judge.js';
export { tokenize, countTokens, hashContext } from './tokenizer.js';
export { generate, versionKey, type GenRequest, type Generated } from './generator.js';
export { renderChat } from './requests.js';
export { FakeClock, realClock, type Clock } from './timing.js';

export interface SimStats {
  running: number;
  waiting: number;
  kvUsage: number;
  /** Inference requests accepted for generation. */
  requests: number;
  /** Tokens emitted. */
  tokens: number;
  faults: Record<FaultKind, number>;
  sleepLevel: number;
  phase: string;
  adapters: string[];
  /** True after the process-exit fault closed this (in-process) worker. */
  exited: boolean;
  /** Requests served in its warm-up, before it listened (on a throwaway server, not counted above). */
  warmedUp: number;
}

export interface SimHandle {
  url: string;
  port: number;
  model: string;
  version: string;
  close(): Promise<void>;
  /** Replace the active faults (camelCase; same names as the config's `faults`). */
  setFaults(f: SimFaultSpec): void;
  clearFaults(): void;
  stats(): SimStats;
  /** Wait for the next injected fault of a kind (resolves when the worker injects it). */
  nextFault(kind: FaultKind): Promise<void>;
  /** Worker events: 'fault' (kind), 'request' ('running' | 'waiting' | 'rejected'), 'finished' ('stop' | 'length' | 'abort' | 'crash'), 'phase' ('sleeping' | 'waking' | 'ready'). */
  events: EventEmitter;
}

/** Start one simulated worker; `port: 0` picks a free port (see `handle.port`). */
export async function startSim(opts: SimStartOptions & { clock?: Clock } = {}): Promise<SimHandle> {
  const o = resolveOptions(opts);
  // like vLLM, which runs its model before its API server listens: /health answers once warm
  const warmedUp = await warmUp(o, o.warmupRequests);
  const s = new SimServer(o, opts.clock);
  const port = await s.listen();
  const e = s.engine;
  const host = o.host.includes(':') ? `[${o.host}]` : o.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    model: o.model,
    version: o.version,
    close: () => (closing ??= s.close()),
    setFaults: (f) => e.faults.set(f),
    clearFaults: () => e.faults.clear(),
    events: e.events,
    nextFault: (kind) =>
      new Promise<void>((resolve) => {
        const on = (k: FaultKind) => {
          if (k !== kind) return;
          e.events.off('fault', on);
          resolve();
        };
        e.events.on('fault', on);
      }),
    stats: () => ({
      running: e.scheduler.running,
      waiting: e.scheduler.waiting,
      kvUsage: e.scheduler.kvUsage,
      requests: e.requests,
      tokens: e.tokensOut,
      faults: { ...e.faults.counts },
      sleepLevel: e.life.sleepLevel,
      phase: e.life.phase,
      adapters: e.loras.list().map((a) => a.name),
      exited: s.hasExited,
      warmedUp,
    }),
  };
}

/**
 * Start `n` workers of the same version. Ports are `portBase + i`, or all free ports when
 * `portBase` is 0. If one fails to start, the ones already started are closed.
 */
export async function startSimFleet(n: number, opts: SimStartOptions & { portBase?: number; clock?: Clock } = {}): Promise<SimHandle[]> {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`workers: expected a positive integer, got ${n}`);
  const base = opts.portBase ?? 0;
  const handles: SimHandle[] = [];
  try {
    for (let i = 0; i < n; i++) handles.push(await startSim({ ...opts, port: base === 0 ? 0 : base + i }));
  } catch (e) {
    await Promise.all(handles.map((h) => h.close()));
    throw e;
  }
  return handles;
}
