// The report of the gateway's own resource exhaustion: one line per episode, with what it left out.
import { describe, expect, it } from 'vitest';
import { episodeLog } from '../../../src/gateway/local.js';

describe('episodeLog', () => {
  it('writes at most one line per interval, then says how many failures it did not write', () => {
    const lines: string[] = [];
    let now = 0;
    const report = episodeLog((l) => lines.push(l), 10_000, () => now);
    report('EMFILE', 'first');
    for (let i = 0; i < 50; i++) {
      now += 100;
      report('EMFILE', `again ${i}`);
    }
    expect(lines).toEqual(['glidepath: gateway out of local resources (EMFILE): first\n']);
    now = 10_000;
    report('EADDRNOTAVAIL', 'ports');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe('glidepath: gateway out of local resources (EADDRNOTAVAIL): ports (and 50 more such failures since the last report)\n');
    // a new episode long after: no count carried over
    now = 60_000;
    report('EMFILE', 'later');
    expect(lines[2]).toBe('glidepath: gateway out of local resources (EMFILE): later\n');
  });
});
