// Command words: argv splitting without a shell, variables, durations, the glidepath/dynamo alias.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLI_PATH, resolveArgv } from '../../../src/rollout/pipeline/exec.js';
import { WordError, commandArgv, expandString, formatDuration, parseDuration, renderArgv } from '../../../src/rollout/pipeline/words.js';

const vars: Record<string, string> = { V: 'v2', P: '/models/a b', EMPTY: '' };
const argv = (s: string) => commandArgv(s, (n) => vars[n]);

describe('command words', () => {
  it('splits like a shell, expanding inside a word without splitting the value', () => {
    expect(argv('glidepath deploy green --version $V').argv).toEqual(['glidepath', 'deploy', 'green', '--version', 'v2']);
    expect(argv('x --model $P').argv).toEqual(['x', '--model', '/models/a b']);
    expect(argv(`node -e "console.log('hi there')"`).argv).toEqual(['node', '-e', "console.log('hi there')"]);
    expect(argv(`a "b \\"c\\" \\$V $V" 'd $V' e\\ f`).argv).toEqual(['a', 'b "c" $V v2', 'd $V', 'e f']);
    expect(argv('a "$EMPTY" $EMPTY').argv).toEqual(['a', '', '']);
    expect(argv('  a\tb  ').argv).toEqual(['a', 'b']);
  });

  it('reports unset variables once each', () => {
    expect(argv('a $X ${X} $Y').missing).toEqual(['X', 'Y']);
  });

  it('refuses shell syntax and unterminated quotes with their offset', () => {
    const at = (s: string) => {
      try {
        argv(s);
      } catch (e) {
        expect(e).toBeInstanceOf(WordError);
        return `${(e as WordError).at}: ${(e as Error).message}`;
      }
      return 'ok';
    };
    expect(at('a | b')).toMatch(/^2: shell syntax "\|" is not supported/);
    expect(at('a && b')).toMatch(/^2: shell syntax "&"/);
    expect(at('a > out')).toMatch(/^2: shell syntax ">"/);
    expect(at('a "|" \'>\'')).toBe('ok');
    expect(at('echo $(whoami)')).toBe('0: command substitution $(…) is not supported: run steps execute without a shell');
    expect(at('echo "abc')).toBe('5: unterminated double quote (")');
    expect(at('echo ${V')).toBe('0: "${" without a closing "}"');
    expect(at('echo ${1x}')).toBe('0: invalid variable name "1x" in ${…}');
    expect(at('')).toBe('0: empty command');
  });

  it('expands plain strings without splitting', () => {
    expect(expandString('$V and ${P}', (n) => vars[n])).toEqual({ value: 'v2 and /models/a b', missing: [] });
  });

  it('renders argv so a shell would split it back the same way', () => {
    expect(renderArgv(['a', 'b c', "it's", '', '--x=1'])).toBe(`a 'b c' 'it'\\''s' '' --x=1`);
  });

  it('maps glidepath and dynamo to this CLI under the current node', () => {
    expect(resolveArgv(['dynamo', 'swap', '--confirm'], '/cli.js')).toEqual([process.execPath, '/cli.js', 'swap', '--confirm']);
    expect(resolveArgv(['glidepath', 'status'], '/cli.js')).toEqual([process.execPath, '/cli.js', 'status']);
    expect(resolveArgv(['python', 'x.py'], '/cli.js')).toEqual(['python', 'x.py']);
  });

  it('finds the built CLI even when this code runs from src/', () => {
    // `npm test` builds first; the built CLI is what a run step spawns
    expect(CLI_PATH.endsWith('dist/cli/main.js')).toBe(true);
    expect(existsSync(CLI_PATH)).toBe(true);
    expect(resolveArgv(['glidepath', 'x'])[1]).toBe(CLI_PATH);
  });

  it('parses and formats durations', () => {
    expect(['500ms', '30s', '5m', '1h', '1.5s', '0s', '5', '5 min', ''].map(parseDuration)).toEqual([
      500,
      30_000,
      300_000,
      3_600_000,
      1500,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect([500, 30_000, 300_000, 7_200_000, 1500].map(formatDuration)).toEqual(['500ms', '30s', '5m', '2h', '1500ms']);
  });
});
