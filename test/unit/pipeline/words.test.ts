// Command words: argv splitting without a shell, variables, durations; scope selection for triggers.
import { describe, expect, it } from 'vitest';
import { observe } from '../../../src/rollout/pipeline/observe.js';
import { resolveArgv } from '../../../src/rollout/pipeline/exec.js';
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

  it('parses and formats durations', () => {
    expect(['500ms', '30s', '5m', '1h', '1.5s', '0s', '5', '5 min', ''].map(parseDuration)).toEqual([500, 30_000, 300_000, 3_600_000, 1500, undefined, undefined, undefined, undefined]);
    expect([500, 30_000, 300_000, 7_200_000, 1500].map(formatDuration)).toEqual(['500ms', '30s', '5m', '2h', '1500ms']);
  });
});

describe('trigger scopes from GET /status', () => {
  const win = (requests: number, errorRate: number | null, p99: number | null) => ({ requests, errorRate, latencyMs: { p50: p99, p99 }, ttftMs: { p50: null, p99: null }, tpotMs: { p50: 1, p99: 2 } });
  it('active, stable (route.stable) and canary (largest other weight)', () => {
    const o = observe(
      {
        models: [
          {
            model: 'm',
            active: 'v1',
            route: { stable: 'v1', weights: { v1: 0.9, v2: 0.1, v3: 0 } },
            versions: [
              { version: 'v1', status: 'active', window: win(100, 0.01, 200) },
              { version: 'v2', status: 'ready', window: win(0, null, null) },
            ],
          },
        ],
      },
      'm',
    );
    expect(o.versions).toEqual({ active: 'v1', stable: 'v1', canary: 'v2' });
    expect(o.stats.active).toEqual({ requests: 100, error_rate: 0.01, p99_latency: 200, p50_latency: 200, p99_ttft: null, p99_tpot: 2 });
    // no requests: the error rate is no data, not 0
    expect(o.stats.canary?.error_rate).toBeNull();
  });

  it('no canary when the route has one version; unknown model is an error', () => {
    const st = { models: [{ model: 'm', active: 'v1', route: { weights: { v1: 1 } }, versions: [{ version: 'v1', status: 'active' }] }] };
    expect(observe(st, 'm').versions).toEqual({ active: 'v1', stable: 'v1' });
    expect(() => observe(st, 'x')).toThrow('the admin API does not know model "x" (it serves: m)');
  });
});
