// Sleep mode: levels 1 and 2 as in vLLM, waking (the wake time from 1, the reload time from 2), and loading.
import { BadRequestError, UnavailableError } from '../errors.js';
import type { Clock } from './timing.js';

export type Phase = 'loading' | 'ready' | 'sleeping' | 'waking';

export class Lifecycle {
  private phaseNow: Phase;
  private level: 0 | 1 | 2 = 0;
  private readonly waiters = new Set<() => void>();
  private timers = new Set<unknown>();

  constructor(
    private readonly clock: Clock,
    private readonly loadTimeMs: number,
    private readonly wakeMs: number,
    private readonly reloadMs: number,
    private readonly onPhase: (p: Phase) => void = () => {},
  ) {
    this.phaseNow = loadTimeMs > 0 ? 'loading' : 'ready';
    if (loadTimeMs > 0) this.after(loadTimeMs, () => this.ready());
  }

  get phase(): Phase {
    return this.phaseNow;
  }
  get sleepLevel(): number {
    return this.level;
  }
  get isSleeping(): boolean {
    return this.phaseNow === 'sleeping' || this.phaseNow === 'waking';
  }

  /** Parse `level` from the query string (default 1, as vLLM) and sleep. */
  sleep(levelParam: string | null): void {
    const level = levelParam === null || levelParam === '' ? 1 : Number(levelParam);
    if (level !== 1 && level !== 2) throw new BadRequestError('invalid_sleep_level', `level must be 1 or 2, got ${JSON.stringify(levelParam)}`);
    if (this.phaseNow === 'loading') throw new UnavailableError('model_loading', 'the model is still loading; it cannot sleep yet', { retryAfterS: 1 });
    if (this.phaseNow === 'sleeping' && this.level >= level) return;
    this.level = level;
    this.phaseNow = 'sleeping';
    this.onPhase('sleeping');
  }

  /** Wake up; resolves when awake (level 2 takes the load time again). */
  wake(): Promise<void> {
    if (this.phaseNow === 'ready' || this.phaseNow === 'loading') return this.whenReady();
    if (this.phaseNow === 'sleeping') {
      const ms = this.level === 2 ? this.reloadMs : this.wakeMs;
      this.phaseNow = 'waking';
      this.onPhase('waking');
      if (ms <= 0) this.ready();
      else this.after(ms, () => this.ready());
    }
    return this.whenReady();
  }

  private whenReady(): Promise<void> {
    if (this.phaseNow === 'ready') return Promise.resolve();
    return new Promise((resolve) => this.waiters.add(resolve));
  }

  private ready(): void {
    this.phaseNow = 'ready';
    this.onPhase('ready');
    this.level = 0;
    for (const w of this.waiters) w();
    this.waiters.clear();
  }

  private after(ms: number, fn: () => void): void {
    const h = this.clock.setTimer(() => {
      this.timers.delete(h);
      fn();
    }, ms);
    this.timers.add(h);
  }

  /** Stop pending timers and release waiters (server shutdown). */
  dispose(): void {
    for (const h of this.timers) this.clock.clearTimer(h);
    this.timers.clear();
    for (const w of this.waiters) w();
    this.waiters.clear();
  }
}
