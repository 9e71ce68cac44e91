// A model's degradation level (0–4) from its healthy capacity against the throughput it must serve,
// with hysteresis: worse at once, better only after the ratio has held above the level's threshold
// (plus a margin) for a while (docs/resilience.md, "Graceful degradation").
import { DEFAULTS } from '../defaults.js';

export type DegradationLevel = 0 | 1 | 2 | 3 | 4;

/** Lowest capacity ratio of levels 0, 1, 2, 3 (below the last: level 4), as in seed 004. */
const THRESHOLDS: readonly number[] = DEFAULTS.gateway.degradationThresholds;

/** The share of a worker's request slots a level leaves (seed 004's batch size: all, ¾ at levels 1–2, ½ from 3). */
export function levelShare(level: DegradationLevel): number {
  return DEFAULTS.gateway.degradationConcurrency[level];
}

/** The level a ratio calls for, with no hysteresis. */
export function levelFor(ratio: number): DegradationLevel {
  for (let i = 0; i < THRESHOLDS.length; i++) if (ratio >= (THRESHOLDS[i] as number)) return i as DegradationLevel;
  return 4;
}

export interface LevelChange {
  from: DegradationLevel;
  to: DegradationLevel;
  ratio: number;
}

export class Degradation {
  level: DegradationLevel = 0;
  ratio = 1;
  /** Since when (ms) the ratio has called for a better level than the current one; NaN: it has not. */
  private betterSince = NaN;

  constructor(
    /** A ratio must clear a better level's threshold by this much to count towards it. */
    private readonly margin: number,
    /** …for this long (ms) before the level improves. */
    readonly recoverAfterMs: number,
  ) {}

  /**
   * The capacity ratio is `ratio` at `now`: the change of level it makes, if any. A worse level
   * applies at once; a better one when the ratio has called for it, with the margin (below 1), for
   * `recoverAfterMs` without a dip back to the current level (it then improves to the level the
   * ratio earns then, not step by step).
   */
  assess(ratio: number, now: number): LevelChange | undefined {
    this.ratio = ratio;
    const want = levelFor(ratio);
    if (want > this.level) return this.set(want, ratio);
    // full capacity (a ratio of 1 or more) earns level 0 as it is: capacity often tops out at exactly 1
    const better = ratio >= 1 ? 0 : levelFor(ratio - this.margin);
    if (better >= this.level) {
      this.betterSince = NaN;
      return undefined;
    }
    if (this.betterSince !== this.betterSince) this.betterSince = now;
    if (now - this.betterSince < this.recoverAfterMs) return undefined;
    return this.set(better, ratio);
  }

  /** ms until a pending improvement is due at `now` (NaN: none pending). */
  dueIn(now: number): number {
    return this.betterSince === this.betterSince ? Math.max(0, this.betterSince + this.recoverAfterMs - now) : NaN;
  }

  private set(to: DegradationLevel, ratio: number): LevelChange {
    const from = this.level;
    this.level = to;
    this.betterSince = NaN;
    return { from, to, ratio };
  }
}
