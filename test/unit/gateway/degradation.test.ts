// Degradation levels from the capacity ratio (seed 004's thresholds) with hysteresis, and how a
// request's tier is found (API key, a header only from trusted addresses, the default).
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Degradation, levelFor } from '../../../src/gateway/degradation.js';
import { TierPolicy } from '../../../src/gateway/tiers.js';
import type { FrontRequest } from '../../../src/gateway/front.js';

describe('degradation levels', () => {
  it('follow the thresholds 1.0 / 0.75 / 0.5 / 0.25', () => {
    expect([1.2, 1, 0.99, 0.75, 0.74, 0.5, 0.49, 0.25, 0.24, 0].map(levelFor)).toEqual([0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
  });

  it('get worse at once and better only after the ratio has cleared the level (plus the margin) for the recovery time', () => {
    const d = new Degradation(0.05, 10_000);
    expect(d.assess(0.5, 0)).toEqual({ from: 0, to: 2, ratio: 0.5 });
    expect(d.assess(0.3, 100)).toEqual({ from: 2, to: 3, ratio: 0.3 });
    // 0.78 is above level 1's 0.75 but not by the margin: it earns level 2, after 10 s
    expect(d.assess(0.78, 1_000)).toBeUndefined();
    expect(d.dueIn(1_000)).toBe(10_000);
    expect(d.assess(0.78, 10_999)).toBeUndefined();
    expect(d.assess(0.78, 11_000)).toEqual({ from: 3, to: 2, ratio: 0.78 });
    // full capacity earns level 0; a dip back to the current level resets the wait
    expect(d.assess(1.0, 12_000)).toBeUndefined();
    expect(d.assess(0.6, 13_000)).toBeUndefined();
    expect(d.dueIn(13_000)).toBeNaN();
    expect(d.assess(1.0, 14_000)).toBeUndefined();
    expect(d.assess(1.0, 23_999)).toBeUndefined();
    expect(d.assess(1.0, 24_000)).toEqual({ from: 2, to: 0, ratio: 1.0 });
    expect(d.level).toBe(0);
  });

  it('does not flap around a threshold: a ratio that wobbles across 0.5 stays at level 3', () => {
    const d = new Degradation(0.05, 5_000);
    d.assess(0.49, 0);
    let changes = 0;
    for (let t = 1_000; t < 60_000; t += 1_000) if (d.assess(t % 2000 === 0 ? 0.52 : 0.49, t) !== undefined) changes++;
    expect(changes).toBe(0);
    expect(d.level).toBe(3);
  });
});

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
function req(headers: Record<string, string>, remoteAddress = '203.0.113.9'): FrontRequest {
  return { method: 'POST', url: '/v1/chat/completions', headers, body: Buffer.alloc(0), httpVersion: '1.1', remoteAddress };
}

describe('tiers', () => {
  const p = new TierPolicy({
    order: ['premium', 'standard', 'best_effort'],
    default: 'standard',
    header: 'X-Glidepath-Tier',
    trustedSources: ['10.0.0.0/8', '::1'],
    keys: new Map([
      [sha('sk-gold'), 'premium'],
      [sha('sk-free'), 'best_effort'],
    ]),
  });

  it('an API key places its request', () => {
    expect(p.of(req({ authorization: 'Bearer sk-gold' })).name).toBe('premium');
    expect(p.of(req({ authorization: 'Bearer sk-free' }))).toEqual({ name: 'best_effort', rank: 2, lowest: true });
    expect(p.of(req({ authorization: 'Bearer sk-unknown' })).name).toBe('standard');
  });

  it('the tier header counts only from a trusted address: a client cannot raise its own tier', () => {
    expect(p.of(req({ 'x-glidepath-tier': 'premium' })).name).toBe('standard');
    expect(p.of(req({ 'x-glidepath-tier': 'premium' }, '10.1.2.3')).name).toBe('premium');
    expect(p.of(req({ 'x-glidepath-tier': 'premium' }, '::ffff:10.1.2.3')).name).toBe('premium');
    expect(p.of(req({ 'x-glidepath-tier': 'premium' }, '::1')).name).toBe('premium');
    expect(p.of(req({ 'x-glidepath-tier': 'no-such-tier' }, '10.1.2.3')).name).toBe('standard');
    // a key wins over the header
    expect(p.of(req({ 'x-glidepath-tier': 'premium', authorization: 'Bearer sk-free' }, '10.1.2.3')).name).toBe('best_effort');
  });
});
