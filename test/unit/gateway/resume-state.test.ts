// What a stream sent, read back at a break: LF or CRLF framing, the role event, folding past the buffer's bound.
import { describe, expect, it } from 'vitest';
import { SentLog } from '../../../src/gateway/resume-state.js';

const ev = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 5, model: 'm', choices: [{ index: 0, delta }] })}`;

describe('SentLog', () => {
  it('reads events framed with LF and with CRLF alike (workers send either)', () => {
    for (const nl of ['\n', '\r\n']) {
      const log = new SentLog(true, 65_536);
      log.append(Buffer.from([ev({ role: 'assistant', content: '' }), ev({ content: 'Hé' }), ev({ content: 'llo' })].map((e) => e + nl + nl).join('')));
      expect(log.read()).toMatchObject({ id: 'c1', created: 5, text: 'Héllo', tokenEvents: 2, role: true, unreadable: 0 });
      log.release();
    }
  });

  it('folds what it holds into text past its bound, and reads the same', () => {
    const log = new SentLog(true, 4096);
    let want = '';
    for (let i = 0; i < 200; i++) {
      log.append(Buffer.from(`${ev({ content: ` w${i}` })}\n\n`));
      want += ` w${i}`;
    }
    expect(log.size).toBeLessThanOrEqual(16_384);
    expect(log.read()).toMatchObject({ text: want, tokenEvents: 200 });
  });

  it('keeps the token ids of what it folded, and reading twice reads the same', () => {
    const log = new SentLog(false, 4096);
    const ids: number[] = [];
    for (let i = 0; i < 200; i++) {
      log.append(Buffer.from(`data: ${JSON.stringify({ id: 'c', choices: [{ index: 0, text: ` w${i}`, token_ids: [i] }] })}\n\n`));
      ids.push(i);
    }
    expect(log.read()).toMatchObject({ tokenIds: ids, idsAtText: 200, idsMissing: false });
    expect(log.read().tokenIds).toEqual(ids);
  });
});
