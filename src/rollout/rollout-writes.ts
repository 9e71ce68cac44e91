// One rollout's writes, as every controller that persists one makes them: its state saved in turn
// (each write names the revision the previous one made, so two never overlap), and its events — a
// control event at once and, best effort, an entry in the rollout's own event log.
import type { ControllerPorts, RolloutLogEntry } from './ports.js';
import type { RolloutState } from './rollout-record.js';

/** A running rollout as its controller keeps it: the state, the revision its next write names, the write under way. */
export interface Saved<S extends RolloutState = RolloutState> {
  state: S;
  revision: number;
  saving: Promise<unknown>;
  /** The state as the store last took it (read or written): what `restoreSaved` puts back. */
  saved?: S;
  /** The last write failed: the state in memory may hold a change the store does not. */
  writeFailed?: boolean;
}

/** Write the state as it is when its turn comes; with `event`, that entry of its log in the same write. */
export function saveInTurn<S extends RolloutState>(ports: Pick<ControllerPorts, 'clock' | 'rollouts'>, l: Saved<S>, event?: RolloutLogEntry): Promise<void> {
  const run = l.saving.then(async () => {
    l.state.updatedAt = ports.clock.now();
    // what is written is this copy, and it is what a failed write later puts back
    const copy = structuredClone(l.state);
    try {
      l.revision = await ports.rollouts.save(copy, l.revision, event);
    } catch (err) {
      l.writeFailed = true;
      throw err;
    }
    l.saved = copy;
    l.writeFailed = false;
  });
  l.saving = run.catch(() => undefined);
  return run;
}

/**
 * After a change whose write failed (the store refused it, an etcd blip): the state in memory as the
 * store has it, changed in place (background work holds the object); whether it was put back. A controller then acts
 * on what is persisted, as a restart would, never on a phase or step that was not saved: a terminal
 * phase kept in memory only would stop the rollout being ticked while the store says it runs.
 */
export function restoreSaved(l: Saved): boolean {
  if (l.writeFailed !== true || l.saved === undefined) return false;
  const target = l.state as unknown as Record<string, unknown>;
  for (const k of Object.keys(target)) delete target[k];
  Object.assign(target, structuredClone(l.saved));
  l.writeFailed = false;
  return true;
}

/** `<prefix>_<kind>` as a control event naming the rollout, then in its own log (never failing the caller). */
export async function rolloutEvent(
  ports: Pick<ControllerPorts, 'clock' | 'emit' | 'rollouts'>,
  s: { id: string; model: string },
  prefix: string,
  version: string,
  kind: string,
  message: string,
): Promise<void> {
  const e = stepEvent(ports, s, prefix, version, kind, message);
  // the rollout's own event log is best effort: the control event already went out
  await ports.rollouts.appendEvent(s.id, e).catch(() => undefined);
}

/** `<prefix>_<kind>` as a control event at once; the entry for the rollout's log, to be saved with its state (saveInTurn). */
export function stepEvent(
  ports: Pick<ControllerPorts, 'clock' | 'emit'>,
  s: { id: string; model: string },
  prefix: string,
  version: string,
  kind: string,
  message: string,
): RolloutLogEntry {
  const at = ports.clock.now();
  ports.emit({ kind: `${prefix}_${kind}`, model: s.model, version, message: `${s.id}: ${message}`, at });
  return { at, kind, message };
}
