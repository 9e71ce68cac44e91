// CLI output: human tables vs `--output json`, error printing, and exit codes.
import { ApiError, ConfigError, GlidepathError } from '../errors.js';

/** Exit codes: 0 success, 1 refused operation / failed check, 2 bad usage. */
export const EXIT = { ok: 0, refused: 1, usage: 2 } as const;

/** A usage error found after commander parsed the arguments (bad value, conflicting flags). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type OutputFormat = 'table' | 'json';

export function parseOutput(v: string): OutputFormat {
  if (v === 'table' || v === 'json') return v;
  throw new UsageError(`--output must be "table" or "json", got ${JSON.stringify(v)}`);
}

export function exitCodeFor(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  return EXIT.refused;
}

/**
 * A reader that closed our output (`glidepath status | head -2`) has what it wanted: end quietly, as
 * git and ls do, instead of dying of EPIPE with a stack trace. A server (`up`, `sim`) keeps serving
 * without its output instead of exiting, so that its workers are still stopped by its signals.
 */
export function onOutputClosed(then: 'exit' | 'keep-running'): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err;
      // exit code already set by a failure stays; otherwise the command did its job for the reader
      if (then === 'exit') process.exit();
    });
  }
}

export function printError(err: unknown): void {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
  } else if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n`);
  } else if (err instanceof GlidepathError || err instanceof ApiError) {
    process.stderr.write(`error: ${err.message} (${err.code})\n`);
  } else if (err instanceof Error) {
    process.stderr.write(`error: ${err.message}\n`);
  } else {
    process.stderr.write(`error: ${String(err)}\n`);
  }
}

/** Render rows as an aligned table with a header; every cell is stringified. */
export function table(headers: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const cell = (c: unknown): string => {
    if (c === undefined || c === null || c === '') return '-';
    if (typeof c === 'string') return c;
    if (typeof c === 'number' || typeof c === 'boolean' || typeof c === 'bigint') return String(c);
    return JSON.stringify(c) ?? '-';
  };
  const cells = rows.map((r) => r.map(cell));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...cells.map(line)].join('\n') + '\n';
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
