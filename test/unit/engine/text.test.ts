import { describe, expect, it } from 'vitest';
import { TextStream } from '../../../src/engine/text.js';

/** A byte-level detokenizer: token id = one byte (as byte-fallback tokens are). */
const bytes = (ids: readonly number[]) => Buffer.from(ids).toString('utf8');
const ids = (s: string) => [...Buffer.from(s, 'utf8')];

function run(s: string, stops: string[]): { out: string[]; all: string; stopped: string | null } {
  const t = new TextStream(bytes, stops);
  const out: string[] = [];
  for (const id of ids(s)) {
    out.push(t.push(id));
    if (t.stopped !== null) break;
  }
  out.push(t.flush());
  return { out, all: t.all, stopped: t.stopped };
}

describe('TextStream', () => {
  it('gives out text as it comes when there is no stop string', () => {
    const r = run('hello', []);
    expect(r.out).toEqual(['h', 'e', 'l', 'l', 'o', '']);
    expect(r.all).toBe('hello');
  });

  it('holds a character split across byte tokens until it is whole', () => {
    const r = run('aé€b', []);
    expect(r.out.join('')).toBe('aé€b');
    // é is two bytes, € three: nothing goes out until their last byte
    expect(r.out).toEqual(['a', '', 'é', '', '', '€', 'b', '']);
  });

  it('ends at a stop string spread over tokens and never sends any of it', () => {
    const r = run('one two STOP three', ['STOP']);
    expect(r.stopped).toBe('STOP');
    expect(r.out.join('')).toBe('one two ');
    expect(r.all).toBe('one two ');
    // what goes out never holds the start of the stop string before it is known not to be one
    for (const piece of r.out) expect(piece.includes('S')).toBe(false);
  });

  it('takes the earliest of several stop strings, and sends a held-back tail that was not one', () => {
    expect(run('abcXYdefXZ', ['XZ', 'XYd']).stopped).toBe('XYd');
    const r = run('abcX', ['XZ']);
    expect(r.stopped).toBeNull();
    expect(r.out.join('')).toBe('abcX');
    expect(r.out.at(-1)).toBe('X');
  });

  it('shows a character left incomplete at the end as U+FFFD', () => {
    const t = new TextStream(bytes, []);
    expect(t.push(0xe2)).toBe('');
    expect(t.flush()).toBe('\uFFFD');
  });

  it('never sends half of a character outside the BMP, even while holding back for a stop string', () => {
    const r = run('ab😀cd', ['xy']);
    expect(r.out.join('')).toBe('ab😀cd');
    for (const piece of r.out) {
      const last = piece.charCodeAt(piece.length - 1);
      expect(last >= 0xd800 && last <= 0xdbff, JSON.stringify(piece)).toBe(false);
    }
  });
});
