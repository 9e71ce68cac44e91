// The gateway's own resource exhaustion (descriptors, ports, memory) as operators hear of it: a line per episode, not per request.
import { DEFAULTS } from '../defaults.js';

/** Told of every request that failed for lack of the gateway's own resources: the errno and the client's error message. */
export type LocalResourceReporter = (code: string, message: string) => void;

/**
 * A reporter that writes one line at most every `intervalMs`, with the number of failures since
 * the line before. Small on purpose: it is what gets rewired to a logger.
 */
export function episodeLog(
  write: (line: string) => void = (line) => void process.stderr.write(line),
  intervalMs: number = DEFAULTS.gateway.localResourceLogIntervalMs,
  now: () => number = () => performance.now(),
): LocalResourceReporter {
  let last = -Infinity;
  let since = 0;
  return (code, message) => {
    const t = now();
    if (t - last < intervalMs) {
      since++;
      return;
    }
    last = t;
    const more = since === 0 ? '' : ` (and ${since} more such failures since the last report)`;
    since = 0;
    write(`glidepath: gateway out of local resources (${code}): ${message}${more}\n`);
  };
}
