// The report of the gateway's own resource exhaustion, and the throttle behind every flood-prone warning: one line per episode, with what it left out.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { localResourceLog } from '../../../src/gateway/local.js';

describe('localResourceLog', () => {
  it('warns at most once per interval, then says how many failures it did not write', () => {
    const lines: Record<string, unknown>[] = [];
    let now = 0;
    const report = localResourceLog(pino({}, { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) }), 10_000, () => now);
    report('EMFILE', 'first');
    for (let i = 0; i < 50; i++) {
      now += 100;
      report('EMFILE', `again ${i}`);
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, code: 'EMFILE', suppressedSinceLast: 0, msg: 'gateway out of local resources (EMFILE): first' });
    now = 10_000;
    report('EADDRNOTAVAIL', 'ports');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ code: 'EADDRNOTAVAIL', suppressedSinceLast: 50, msg: 'gateway out of local resources (EADDRNOTAVAIL): ports' });
    // a new episode long after: no count carried over
    now = 60_000;
    report('EMFILE', 'later');
    expect(lines[2]).toMatchObject({ suppressedSinceLast: 0, msg: 'gateway out of local resources (EMFILE): later' });
  });
});
