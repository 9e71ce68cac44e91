// The `time_sharing:` section (docs/multi-model.md#temporal-sharing): its schema, and the checks
// that need the models (members exist, in one group at most, their versions fit the same slots);
// and the slots of a model whose blue-green standby sleeps on its active version's GPUs.
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import type { VersionConfig } from '../domain/spec.js';
import type { ConfigIssue } from '../errors.js';
import { durationMs, msg, name, posInt } from './schema-parts.js';

const D = DEFAULTS.timeShare;

export const timeSharingSchema = z
  .array(
    z
      .object({
        /** Names the group (its GPUs are held as `@<name>`); the members joined by `+` when not given. */
        name: name('a group name').optional(),
        models: z.array(name('a model name'), msg('a list of model names')).min(2, msg('at least two models')),
        sleep_level: z.union([z.literal(1), z.literal(2)], msg('1 (weights kept in CPU memory) or 2 (discarded)')).default(D.sleepLevel),
        min_active_ms: durationMs().default(D.minActiveMs),
        idle_ms: durationMs().default(D.idleMs),
        max_wait_ms: durationMs().default(D.maxWaitMs),
        max_held: posInt().default(D.maxHeld),
      })
      .strict(),
  )
  .default([]);

type RawTimeSharing = z.output<typeof timeSharingSchema>;

/** Models that take turns on the same GPUs: one awake, the others asleep until their requests call them. */
export interface TimeShareConfig {
  readonly name: string;
  readonly models: readonly string[];
  readonly sleepLevel: 1 | 2;
  readonly minActiveMs: number;
  readonly idleMs: number;
  readonly maxWaitMs: number;
  readonly maxHeld: number;
  /** Worker slots (each `tp` GPUs): every version of every member places its workers on them. */
  readonly slots: number;
  readonly tp: number;
  /** The most memory a member's version needs per GPU (the slots' GPUs must have it). */
  readonly memoryGbPerGpu: number;
}

/**
 * The groups, checked against the models: each member exists and is in one group; every version of
 * the members runs `replicas` workers of the same `tp` (they take turns on the same slots), none
 * static, none with hot spares or prefill/decode roles; a quantum shorter than the longest wait.
 */
/** What the models' checks need of them. */
interface ModelView {
  name: string;
  versions: readonly Readonly<VersionConfig>[];
  timeSharedStandby?: boolean | undefined;
  route: { weights: Readonly<Record<string, number>>; shadow?: unknown; overrides?: Readonly<Record<string, string>> };
}

/**
 * What a switch is expected to take before one is measured: the largest member's weights (per slot)
 * copied back from CPU memory (sleep level 1) or read again from storage (level 2), at the planner's rates.
 */
export function switchEstimateMs(g: Pick<TimeShareConfig, 'memoryGbPerGpu' | 'tp' | 'sleepLevel'>): number {
  const rate = g.sleepLevel === 1 ? DEFAULTS.control.planWakeGbPerS : DEFAULTS.control.planLoadGbPerS;
  return ((g.memoryGbPerGpu * g.tp) / rate) * 1000;
}

export function normalizeTimeSharing(raw: RawTimeSharing, models: readonly ModelView[], issues: ConfigIssue[]): TimeShareConfig[] {
  const byName = new Map(models.map((m) => [m.name, m]));
  const groupOf = new Map<string, string>();
  const names = new Set<string>();
  return raw.map((g, gi) => {
    const at = `time_sharing[${gi}]`;
    const groupName = g.name ?? g.models.join('+');
    if (names.has(groupName)) issues.push({ path: `${at}.name`, message: `duplicate time-share group ${JSON.stringify(groupName)}` });
    names.add(groupName);
    if (g.min_active_ms >= g.max_wait_ms)
      issues.push({
        path: `${at}.min_active_ms`,
        message: `min_active_ms (${g.min_active_ms}) must be below max_wait_ms (${g.max_wait_ms}): a waiting model's requests would time out before its turn`,
      });
    const versions: { model: string; v: Readonly<VersionConfig> }[] = [];
    g.models.forEach((m, mi) => {
      const p = `${at}.models[${mi}]`;
      const model = byName.get(m);
      if (model === undefined) return issues.push({ path: p, message: `no model ${JSON.stringify(m)} in models` });
      const other = groupOf.get(m);
      if (other !== undefined) return issues.push({ path: p, message: `model ${JSON.stringify(m)} is already time-shared in group ${JSON.stringify(other)}` });
      groupOf.set(m, groupName);
      oneVersion(model, p, issues);
      for (const v of model.versions) versions.push({ model: m, v });
    });
    const out: TimeShareConfig = {
      name: groupName,
      models: g.models,
      sleepLevel: g.sleep_level,
      minActiveMs: g.min_active_ms,
      idleMs: g.idle_ms,
      maxWaitMs: g.max_wait_ms,
      maxHeld: g.max_held,
      ...slotsOf(at, versions, issues),
    };
    const switchMs = switchEstimateMs(out);
    if (versions.length > 0 && g.min_active_ms < g.max_wait_ms && g.min_active_ms + switchMs >= g.max_wait_ms)
      issues.push({
        path: `${at}.max_wait_ms`,
        message: `a switch is expected to take ~${Math.round(switchMs)} ms (${out.memoryGbPerGpu * out.tp} GB at sleep level ${out.sleepLevel}): min_active_ms (${g.min_active_ms}) plus that must be below max_wait_ms (${g.max_wait_ms}), or a waiting model's requests time out before their turn`,
      });
    return out;
  });
}

/** Its route serves one version (no split, no shadow, no override): two versions cannot be awake at once on shared GPUs. */
function oneVersion(m: ModelView, at: string, issues: ConfigIssue[]): void {
  const routed = Object.entries(m.route.weights).filter(([, w]) => w > 0);
  if (routed.length > 1 || m.route.shadow !== undefined || Object.keys(m.route.overrides ?? {}).length > 0)
    issues.push({
      path: at,
      message: `model ${m.name} shares its GPUs: its route serves one version (no split, no shadow, no override), two cannot be awake at once`,
    });
}

/**
 * The slots of the versions that take turns on them: every one runs `replicas` workers of the same
 * `tp`, none static, none with hot spares or prefill/decode roles.
 */
function slotsOf(
  at: string,
  versions: readonly { model: string; v: Readonly<VersionConfig> }[],
  issues: ConfigIssue[],
): Pick<TimeShareConfig, 'slots' | 'tp' | 'memoryGbPerGpu'> {
  const first = versions[0];
  for (const { model, v } of versions) {
    const what = `${model}/${v.id}`;
    const wrong =
      v.provider.kind === 'static'
        ? 'is static (its workers are not started on GPUs Glidepath places)'
        : (v.spares ?? 0) > 0
          ? 'has hot spares (a sleeping model keeps none)'
          : v.roles !== undefined
            ? 'has prefill/decode roles'
            : first !== undefined && (v.tp !== first.v.tp || v.replicas !== first.v.replicas)
              ? `runs ${v.replicas} worker(s) of TP ${v.tp}, but ${first.model}/${first.v.id} runs ${first.v.replicas} of TP ${first.v.tp}: they take turns on the same slots`
              : undefined;
    if (wrong !== undefined) issues.push({ path: at, message: `${what} ${wrong}` });
  }
  return { slots: first?.v.replicas ?? 0, tp: first?.v.tp ?? 1, memoryGbPerGpu: Math.max(0, ...versions.map(({ v }) => v.gpuMemoryGb / v.tp)) };
}

/**
 * A model with `time_shared_standby`: its versions take turns on slots of its own (held as `@<model>`),
 * the standby asleep on the active's GPUs. Not in a time-share group (its turns are its own), its
 * route on one version (two cannot serve at once), no group named like it.
 */
export function standbySlots(models: readonly ModelView[], groups: readonly TimeShareConfig[], issues: ConfigIssue[]): TimeShareConfig[] {
  const out: TimeShareConfig[] = [];
  models.forEach((m, mi) => {
    if (m.timeSharedStandby !== true) return;
    const at = `models[${mi}].time_shared_standby`;
    const group = groups.find((g) => g.models.includes(m.name) || g.name === m.name);
    if (group !== undefined)
      issues.push({
        path: at,
        message: group.models.includes(m.name)
          ? `model ${m.name} is time-shared in group ${group.name}: its standby cannot also take turns on its GPUs`
          : `time-share group ${group.name} has the name of this model, whose GPUs are held under it`,
      });
    oneVersion(m, `models[${mi}].route`, issues);
    out.push({
      name: m.name,
      models: [m.name],
      sleepLevel: 1,
      minActiveMs: D.minActiveMs,
      idleMs: D.idleMs,
      maxWaitMs: D.maxWaitMs,
      maxHeld: D.maxHeld,
      ...slotsOf(
        at,
        m.versions.map((v) => ({ model: m.name, v })),
        issues,
      ),
    });
  });
  return out;
}

/**
 * Whether a model's versions take turns on the same GPUs — a time-share group's member, or a model
 * with `time_shared_standby` — so that two of them are never awake at once (no split, canary,
 * rolling update; a swap sleeps one before it wakes the other).
 */
export function takesTurns(m: { readonly name: string; readonly timeSharedStandby?: boolean | undefined }, groups: readonly TimeShareConfig[]): boolean {
  return m.timeSharedStandby === true || groups.some((g) => g.models.includes(m.name));
}
