// The process's operational log: JSON lines on stderr (pino), and a throttle for conditions a flood would repeat.
import { pino } from 'pino';
import type { Logger } from 'pino';
import { DEFAULTS } from '../defaults.js';

export type { Logger };

/**
 * JSON lines on stderr at `GLIDEPATH_LOG_LEVEL` (default info; `silent` turns it off). Written
 * synchronously: lines are rare (overload, resource limits, background errors), and a line written
 * just before the process dies must not be lost in a buffer.
 */
export function createLogger(level: string = process.env.GLIDEPATH_LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { pid: process.pid, name: 'glidepath' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ fd: 2, sync: true }));
}

/**
 * A warning that may recur thousands of times a second (refused connections, descriptor
 * exhaustion): logged at most once per interval, and the next line says how many were left out.
 */
export class ThrottledWarning {
  private last = -Infinity;
  private suppressed = 0;

  constructor(
    private readonly log: Logger,
    private readonly intervalMs: number = DEFAULTS.limits.logIntervalMs,
    private readonly now: () => number = Date.now,
  ) {}

  warn(fields: Record<string, unknown>, message: string): void {
    const t = this.now();
    if (t - this.last < this.intervalMs) {
      this.suppressed++;
      return;
    }
    this.last = t;
    this.log.warn({ ...fields, suppressedSinceLast: this.suppressed }, message);
    this.suppressed = 0;
  }
}
