import { describe, expect, it } from 'vitest';
import type { Version, VersionStatus } from '../../../src/domain/version.js';
import {
  applyPatch,
  canTransition,
  fromConfig,
  rollbackEligible,
  transition,
  TRANSITIONS,
  VERSION_STATUSES,
  VersionRuleError,
  versionSpec,
} from '../../../src/domain/version.js';
import { versionConfig } from './version-fixture.js';

const T0 = 1_700_000_000_000;

function inStatus(status: VersionStatus, over: Partial<Version> = {}): Version {
  return { ...fromConfig(versionConfig('v1'), T0), status, ...over };
}

const legal: [VersionStatus, VersionStatus][] = VERSION_STATUSES.flatMap((from) => TRANSITIONS[from].map((to) => [from, to] as [VersionStatus, VersionStatus]));
const illegal: [VersionStatus, VersionStatus][] = VERSION_STATUSES.flatMap((from) =>
  VERSION_STATUSES.filter((to) => !TRANSITIONS[from].includes(to)).map((to) => [from, to] as [VersionStatus, VersionStatus]),
);

describe('transition table', () => {
  it('is the documented set of edges', () => {
    expect(TRANSITIONS).toEqual({
      registered: ['loading', 'retired'],
      loading: ['ready', 'failed', 'retired'],
      ready: ['active', 'standby', 'retired', 'failed'],
      active: ['standby'],
      standby: ['active', 'retired', 'failed'],
      failed: ['loading', 'retired'],
      retired: ['loading'],
    });
    expect(legal.length + illegal.length).toBe(49);
  });

  it.each(legal)('%s → %s is legal', (from, to) => {
    expect(canTransition(from, to)).toBe(true);
    const v = transition(inStatus(from), to, T0 + 5);
    expect(v.status).toBe(to);
    expect(v.updatedAt).toBe(T0 + 5);
  });

  it.each(illegal)('%s → %s is refused naming both states', (from, to) => {
    expect(canTransition(from, to)).toBe(false);
    const v = inStatus(from);
    let err: unknown;
    try {
      transition(v, to, T0 + 5);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(VersionRuleError);
    const e = err as VersionRuleError;
    expect(e.code).toBe('illegal_transition');
    expect(e.status).toBe(409);
    expect(e.from).toBe(from);
    expect(e.to).toBe(to);
    expect(e.message).toContain(`${from} → ${to}`);
    expect(e.message).toContain('llama/v1');
    expect(v.status).toBe(from); // input untouched
  });

  it('never allows the active version to be retired directly', () => {
    expect(() => transition(inStatus('active'), 'retired', T0)).toThrow(/active → retired/);
  });
});

describe('transition side effects', () => {
  it('walks the blue-green happy path with timestamps', () => {
    let v = fromConfig(versionConfig('v1'), T0);
    v = transition(v, 'loading', T0 + 1);
    v = transition(v, 'ready', T0 + 2, { loadTimeMs: 1234, gpus: ['0', '1', '2', '3'] });
    expect(v).toMatchObject({ status: 'ready', loadedAt: T0 + 2, loadTimeMs: 1234, gpus: ['0', '1', '2', '3'] });
    v = transition(v, 'active', T0 + 3);
    expect(v.activatedAt).toBe(T0 + 3);
    expect(v.rollbackEligible).toBe(false);
    v = transition(v, 'standby', T0 + 4);
    expect(v.deactivatedAt).toBe(T0 + 4);
    expect(v.rollbackEligible).toBe(true);
    v = transition(v, 'retired', T0 + 5);
    expect(v.gpus).toEqual([]);
    expect(v.rollbackEligible).toBe(false);
    v = transition(v, 'loading', T0 + 6);
    expect(v.status).toBe('loading');
  });

  it('records a failure and clears it on retry', () => {
    let v = transition(inStatus('loading', { gpus: ['0'] }), 'failed', T0 + 1, { failure: { code: 'oom', message: 'CUDA OOM' } });
    expect(v.failure).toEqual({ at: T0 + 1, from: 'loading', code: 'oom', message: 'CUDA OOM' });
    expect(v.gpus).toEqual([]);
    const generic = transition(inStatus('ready'), 'failed', T0 + 1);
    expect(generic.failure?.message).toBe('failed while ready');
    v = transition(v, 'loading', T0 + 2);
    expect(v.failure).toBeUndefined();
  });

  it('resets health when a version becomes ready and clears a rollback block when it becomes active', () => {
    const r = transition(inStatus('loading', { health: { state: 'unhealthy' } }), 'ready', T0);
    expect(r.health).toEqual({ state: 'unknown' });
    const a = transition(inStatus('standby', { rollbackBlockedReason: 'bad' }), 'active', T0);
    expect(a.rollbackBlockedReason).toBeUndefined();
  });
});

describe('rollbackEligible', () => {
  const base = { activatedAt: T0, rollbackBlockedReason: undefined, health: { state: 'healthy' as const } };
  it.each([
    ['standby, was active, healthy', { ...base, status: 'standby' as const }, true],
    ['standby, health unknown', { ...base, status: 'standby' as const, health: { state: 'unknown' as const } }, true],
    ['standby, never active (warm spare)', { ...base, status: 'standby' as const, activatedAt: undefined }, false],
    ['standby, blocked', { ...base, status: 'standby' as const, rollbackBlockedReason: 'rolled back' }, false],
    ['standby, unhealthy', { ...base, status: 'standby' as const, health: { state: 'unhealthy' as const } }, false],
    ['active', { ...base, status: 'active' as const }, false],
    ['ready', { ...base, status: 'ready' as const }, false],
    ['retired', { ...base, status: 'retired' as const }, false],
  ])('%s → %s', (_name, v, want) => {
    expect(rollbackEligible(v)).toBe(want);
  });
});

describe('fromConfig / versionSpec / applyPatch', () => {
  it('creates a registered version that does not alias the config', () => {
    const cfg = versionConfig('v1');
    const v = fromConfig(cfg, T0);
    expect(v).toMatchObject({ status: 'registered', registeredAt: T0, updatedAt: T0, warmupTokens: 64, gpus: [], rollbackEligible: false });
    expect(v.health).toEqual({ state: 'unknown' });
    expect(v.provider).toEqual({ kind: 'sim', sim: { seed: 1 } });
    v.metadata.owner = 'changed';
    expect(cfg.metadata.owner).toBe('ml-platform');
    expect(versionSpec(v)).toEqual({ ...cfg, metadata: { owner: 'changed' } });
  });

  it('merges metadata, removes undefined keys, sets and clears the rollback block', () => {
    let v = inStatus('standby', { activatedAt: T0 });
    v = applyPatch(v, { metadata: { a: 1, owner: undefined } }, T0 + 1);
    expect(v.metadata).toEqual({ a: 1 });
    v = applyPatch(v, { rollbackBlockedReason: 'bad canary' }, T0 + 2);
    expect(v.rollbackEligible).toBe(false);
    v = applyPatch(v, { rollbackBlockedReason: null }, T0 + 3);
    expect(v.rollbackBlockedReason).toBeUndefined();
    expect(v.rollbackEligible).toBe(true);
    expect(v.updatedAt).toBe(T0 + 3);
  });

  it('refuses a negative load time', () => {
    expect(() => applyPatch(inStatus('ready'), { loadTimeMs: -1 }, T0)).toThrow(VersionRuleError);
  });
});
