// The V8 heap settings the long-running gateway needs, and whether this process was started with them.

/**
 * `--initial-old-space-size=128` (MiB): without it V8 sizes the old generation from the small live
 * heap (~17 MiB), leaves less room above it than the young generation holds, and so starts a full
 * mark-compact again right after each one finishes: measured on the S2 benchmark, a full collection
 * every ~100 ms and ~35 µs of GC-thread CPU per stream. With it, one every ~5 s.
 *
 * `--min-semi-space-size=32 --max-semi-space-size=32` (MiB): a request's garbage dies young, so V8
 * never grows the young generation past ~13 MiB by itself, and each scavenge costs ~1 ms however
 * little survives (the in-flight requests' state): S2 ran one every ~230 ms, 0.6–0.9 µs per stream.
 * With 32 MiB semi-spaces, one scavenge every ~700 ms; measured 1–2 µs less CPU per S2 stream, for
 * ~30 MiB more heap.
 *
 * The main script's `#!/usr/bin/env -S node …` line carries the same flags (a unit test keeps them
 * equal). Node refuses all but `--max-semi-space-size` in NODE_OPTIONS.
 */
export const GATEWAY_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128', '--min-semi-space-size=32', '--max-semi-space-size=32'];

/** The flags of GATEWAY_NODE_FLAGS (by name) that neither the command line nor NODE_OPTIONS set. */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].map((a) => a.split('=')[0]?.replace(/_/g, '-'));
  return GATEWAY_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]?.replace(/_/g, '-')));
}
