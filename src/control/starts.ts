// The worker starts in flight and their cancellation when the control plane shuts down, so that a stop of `glidepath up` leaves no starting worker behind.
import { setMaxListeners } from 'node:events';
import { cancelled } from '../providers/engine.js';
import type { WorkerHandle } from '../providers/types.js';

export class Starts {
  private readonly closing = new AbortController();
  private readonly live = new Set<Promise<unknown>>();

  constructor() {
    // every start in flight listens on the one signal (a version of many workers starts them together)
    setMaxListeners(0, this.closing.signal);
  }

  /** Aborted by `cancel`: what providers and warm-ups are given (StartRequest.signal). */
  get signal(): AbortSignal {
    return this.closing.signal;
  }

  /** Count `p` among the starts in flight until it settles; `p` itself is returned (its rejection stays the caller's). */
  track<T>(p: Promise<T>): Promise<T> {
    this.live.add(p);
    const forget = () => void this.live.delete(p);
    p.then(forget, forget);
    return p;
  }

  /** Throw `worker_start_cancelled` once `cancel` has been called. */
  check(what: string): void {
    cancelled(this.closing.signal, what);
  }

  /** Cancel every start in flight; resolves once all have settled (each stops the process it began). */
  cancel(): Promise<unknown> {
    this.closing.abort();
    return Promise.allSettled([...this.live]);
  }
}

/**
 * Cancel the starts in flight while the `known` workers stop (a worker starting when `up` was told to
 * stop was left running before); then stop the workers a start adopted meanwhile.
 */
export async function stopEverything(starts: Starts, known: () => WorkerHandle[], stop: (h: WorkerHandle) => Promise<void>): Promise<void> {
  const stopped = new Set<string>();
  const pass = () =>
    Promise.all(
      known()
        .filter((h) => !stopped.has(h.id))
        .map((h) => {
          stopped.add(h.id);
          return stop(h);
        }),
    );
  await Promise.all([starts.cancel(), pass()]);
  await pass();
}
