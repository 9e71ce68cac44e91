// The gateway's own resource exhaustion (descriptors, ports, memory) as operators hear of it: a log line per episode, not per request.
import { ThrottledWarning } from '../telemetry/log.js';
import type { Logger } from '../telemetry/log.js';

/** Told of every request that failed for lack of the gateway's own resources: the errno and the client's error message. */
export type LocalResourceReporter = (code: string, message: string) => void;

/** A reporter that warns on `log` at most once per interval (DEFAULTS.limits.logIntervalMs), counting the failures it left out. */
export function localResourceLog(log: Logger, intervalMs?: number, now?: () => number): LocalResourceReporter {
  const w = new ThrottledWarning(log, intervalMs, now);
  return (code, message) => w.warn({ code }, `gateway out of local resources (${code}): ${message}`);
}
