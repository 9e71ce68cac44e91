// Admission arithmetic (src/gateway/limits.ts): the connection ceiling, per-address counts, the token bucket on a fake clock, bounded memory.
import { describe, expect, it } from 'vitest';
import { ClientLimits, autoMaxConnections, descriptorsFor } from '../../../src/gateway/limits.js';

describe('ClientLimits', () => {
  it('admits up to the ceiling and again after a close', () => {
    const l = new ClientLimits({ maxConnections: 2, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 });
    expect([l.admit('a'), l.admit('b'), l.admit('c')]).toEqual([undefined, undefined, 'capacity']);
    l.close('a');
    expect(l.admit('c')).toBeUndefined();
    expect(l.open).toBe(2);
    expect(l.tracked).toBe(0); // no per-client limit: no per-client state at all
  });

  it('weighs an HTTP/2 stream past its connection’s first as one descriptor, half a connection', () => {
    const l = new ClientLimits({ maxConnections: 3, perClientConnections: 0, perClientRps: 0, perClientBurst: 0 });
    expect(l.admit('a')).toBeUndefined(); // 2 of 6 descriptors
    expect([l.admitStream('a'), l.admitStream('a'), l.admitStream('a')]).toEqual([undefined, undefined, undefined]); // 5 of 6
    expect(l.admit('b')).toBe('capacity'); // a connection needs 2
    expect(l.admitStream('a')).toBeUndefined(); // 6 of 6
    expect(l.admitStream('a')).toBe('capacity');
    l.releaseStream('a');
    l.releaseStream('a');
    expect(l.admit('b')).toBeUndefined();
    expect(l.admitStream('a')).toBe('capacity');
    expect(l.extraStreams).toBe(2);
  });

  it('weighs an HTTP/2 stream past its connection’s first as half a connection against the per-client limit too', () => {
    const l = new ClientLimits({ maxConnections: 0, perClientConnections: 2, perClientRps: 0, perClientBurst: 0 });
    expect(l.admit('a')).toBeUndefined(); // 1 of 2
    expect([l.admitStream('a'), l.admitStream('a'), l.admitStream('a')]).toEqual([undefined, undefined, 'client_connections']);
    expect(l.admit('a')).toBe('client_connections');
    expect(l.admit('b')).toBeUndefined(); // another address is not held to a's count
    l.releaseStream('a');
    expect(l.admitStream('a')).toBeUndefined();
    l.releaseStream('a');
    l.releaseStream('a');
    expect(l.admit('a')).toBeUndefined(); // 2 connections, no stream
    l.close('a');
    expect(l.admitStream('a')).toBeUndefined();
    l.close('a'); // the connection closes before its stream: the entry is forgotten
    expect(l.tracked).toBe(1);
    l.releaseStream('a'); // nothing left to give back, nothing negative
    l.close('b');
    expect(l.tracked).toBe(0);
    expect(l.extraStreams).toBe(0);
  });

  it('counts connections per address', () => {
    const l = new ClientLimits({ maxConnections: 0, perClientConnections: 2, perClientRps: 0, perClientBurst: 0 });
    expect([l.admit('a'), l.admit('a'), l.admit('a'), l.admit('b')]).toEqual([undefined, undefined, 'client_connections', undefined]);
    l.close('a');
    expect(l.admit('a')).toBeUndefined();
    l.close('a');
    l.close('a');
    l.close('b');
    expect(l.tracked).toBe(0);
  });

  it('a token bucket per address: the burst at once, then the rate; Retry-After in whole seconds', () => {
    let now = 0;
    const l = new ClientLimits({ maxConnections: 0, perClientConnections: 0, perClientRps: 0.5, perClientBurst: 2 }, () => now);
    expect([l.take('a'), l.take('a'), l.take('a')]).toEqual([0, 0, 2]);
    expect(l.take('b')).toBe(0);
    now += 1000; // half a token
    expect(l.take('a')).toBe(1);
    now += 1000;
    expect(l.take('a')).toBe(0);
    now += 60_000; // refills to the burst, not beyond
    expect([l.take('a'), l.take('a'), l.take('a')]).toEqual([0, 0, 2]);
  });

  it('forgets addresses with no connection and a full bucket: memory stays bounded under many clients', () => {
    let now = 0;
    const l = new ClientLimits({ maxConnections: 0, perClientConnections: 4, perClientRps: 10, perClientBurst: 10 }, () => now);
    for (let i = 0; i < 50_000; i++) {
      const a = `10.0.${i >> 8}.${i & 255}`;
      l.admit(a);
      l.take(a);
      now += 1;
      l.close(a);
    }
    // each address spent a token and was kept until refilled (0.1 s at 10/s): only the last ~100 ms of addresses remain, give or take the sweep's slack
    expect(l.tracked).toBeLessThan(2048);
  });
});

describe('autoMaxConnections', () => {
  it('is half of what the descriptor limit leaves after the reserve', () => {
    expect(autoMaxConnections(20_000)).toBe(9_500);
    expect(autoMaxConnections(1_048_576)).toBe(498_073);
    expect(autoMaxConnections(320)).toBe(32);
    expect(autoMaxConnections(100)).toBe(1);
    expect(autoMaxConnections(undefined)).toBe(0);
  });
});

describe('descriptorsFor', () => {
  it('is the least descriptor limit whose auto ceiling admits that many connections', () => {
    for (const n of [32, 5_000, 9_500, 10_000, 100_000]) {
      const limit = descriptorsFor(n);
      expect(autoMaxConnections(limit)).toBeGreaterThanOrEqual(n);
      expect(autoMaxConnections(limit - 1)).toBeLessThan(n);
    }
    // 10,000 streams: 20,000 descriptors for client and worker connections plus a 5 % reserve
    expect(descriptorsFor(10_000)).toBe(21_053);
  });
});
