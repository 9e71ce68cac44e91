// One wording for zod's issues everywhere (src/config/issues.ts).
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { formatPath, zodIssues, zodLines, zodMessage } from '../../../src/config/issues.js';

const schema = z.object({ model: z.string(), versions: z.array(z.object({ tp: z.number().int() }).strict()) }).strict();
const errorOf = (v: unknown, reportInput = true) => {
  const r = schema.safeParse(v, { reportInput });
  if (r.success) throw new Error('expected issues');
  return r.error;
};

describe('zod issues', () => {
  it('formats paths as written in YAML', () => {
    expect(formatPath(['models', 0, 'versions', 1, 'tp'])).toBe('models[0].versions[1].tp');
    expect(formatPath([0, 'a'])).toBe('[0].a');
    expect(formatPath([])).toBe('');
  });

  it('names each unknown key at its own path, and a missing value "required"', () => {
    const err = errorOf({ versions: [{ tp: 1.5, tpp: 2, x: 1 }], extra: true });
    expect(zodIssues(err)).toEqual([
      { path: ['model'], message: 'required' },
      { path: ['versions', 0, 'tp'], message: expect.stringMatching(/expected int/) as unknown },
      { path: ['versions', 0, 'tpp'], message: 'unknown key "tpp"' },
      { path: ['versions', 0, 'x'], message: 'unknown key "x"' },
      { path: ['extra'], message: 'unknown key "extra"' },
    ]);
  });

  it('says "required" only when zod reported the input (otherwise it cannot tell)', () => {
    expect(zodIssues(errorOf({ versions: [] }, false))[0]?.message).toMatch(/expected string, received undefined/);
  });

  it('lines and one message, with a prefix and a name for the value itself', () => {
    const err = errorOf({ model: 'm', versions: [], more: 1 });
    expect(zodLines(err, 'faults', ['faults'])).toEqual(['faults.more: unknown key "more"']);
    expect(zodMessage(errorOf('not an object'))).toMatch(/^body: /);
    expect(zodMessage(errorOf({ model: 1, versions: [] }))).toMatch(/^model: .*expected string/);
  });
});
