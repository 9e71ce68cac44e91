// The V8 heap settings the long-running gateway needs, and whether this process was started with them.

/**
 * `--initial-old-space-size=128` (MiB): without it V8 sizes the old generation from the small live
 * heap (~17 MiB), leaves less room above it than the young generation holds, and so starts a full
 * mark-compact again right after each one finishes: measured on the S2 benchmark, a full collection
 * every ~100 ms and ~35 µs of GC-thread CPU per stream. With it, one every ~5 s. The main script's
 * `#!/usr/bin/env -S node …` line carries the same flags (a unit test keeps them equal).
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128'];

/** The flags of GATEWAY_NODE_FLAGS (by name) that neither the command line nor NODE_OPTIONS set. */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].map((a) => a.split('=')[0]?.replace(/_/g, '-'));
  return GATEWAY_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]?.replace(/_/g, '-')));
}
