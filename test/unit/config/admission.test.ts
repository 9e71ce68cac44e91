// Resumption, tiers and degradation in glidepath.yaml: defaults, YAML names, and errors with their paths.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { engineTraitsOf } from '../../../src/domain/spec.js';
import { configIssues } from '../../helpers/config-issues.js';

/** The issues a config is refused with (it must be refused). */
const issues = configIssues;

describe('resume, tiers and degradation config', () => {
  it('defaults: resumption on (3 migrations, 60 s), three tiers with standard the default, degradation off, providers continue like vLLM', () => {
    const c = parseConfig({ models: [{ name: 'm', versions: [{ id: 'v1', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } }] }] });
    expect(c.gateway.resume).toEqual({ maxMigrations: 3, budgetMs: 60_000, logBytes: 65_536 });
    const m = c.models[0]!;
    expect(m.tiers).toMatchObject({ order: ['premium', 'standard', 'best_effort'], default: 'standard' });
    expect(m.degradation).toBeUndefined();
    expect(m.versions[0]!.provider).toMatchObject({ resume: 'continue_final_message' });
  });

  it('keys are hashed at load; a worker is worth required ÷ replicas unless given', () => {
    const c = parseConfig({
      models: [
        {
          name: 'm',
          versions: [{ id: 'v1', replicas: 4 }],
          tiers: { keys: [{ key: 'sk-gold', tier: 'premium' }], header: 'x-tier', trusted_sources: ['10.0.0.0/8'] },
          degradation: { required_tokens_per_s: 2000 },
        },
      ],
    });
    const m = c.models[0]!;
    expect([...(m.tiers?.keys ?? [])]).toEqual([[createHash('sha256').update('sk-gold').digest('hex'), 'premium']]);
    expect(m.degradation).toEqual({
      requiredTokensPerS: 2000,
      workerTokensPerS: 500,
      recoverAfterMs: 10_000,
      maxTokensDegraded: 256,
      measureIntervalMs: 5_000,
    });
  });

  it('two tiers and no default: an unplaced request is the lower one; a static version is worth its endpoints less spares', () => {
    const c = parseConfig({
      models: [
        {
          name: 'm',
          versions: [
            {
              id: 'v1',
              spares: 1,
              provider: { kind: 'static', endpoints: ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3', 'http://127.0.0.1:4'] },
            },
          ],
          tiers: { order: ['premium', 'free'] },
          degradation: { required_tokens_per_s: 300 },
        },
      ],
    });
    expect(c.models[0]!.tiers?.default).toBe('free');
    expect(c.models[0]!.degradation?.workerTokensPerS).toBe(100);
  });

  it('bad settings are reported with their paths, all at once', () => {
    const got = issues({
      gateway: { resume: { max_migrations: -1, log_bytes: 100 } },
      models: [
        {
          name: 'm',
          versions: [{ id: 'v1', provider: { kind: 'process', command: 'x', resume: 'sometimes' }, engine: { max_num_seqs: '0' } }],
          tiers: { header: 'x-tier', keys: [{ key: 'a', tier: 'gold' }, { tier: 'premium' }], trusted_sources: ['10.0.0.0/33'] },
          degradation: { required_tokens_per_s: 0 },
        },
      ],
    });
    expect(got.map((i) => i.path).sort()).toEqual(
      [
        'gateway.resume.log_bytes',
        'gateway.resume.max_migrations',
        'models[0].degradation.required_tokens_per_s',
        'models[0].versions[0].engine.max_num_seqs',
        'models[0].versions[0].provider.resume',
      ].sort(),
    );
    const tierIssues = issues({
      models: [
        {
          name: 'm',
          versions: [{ id: 'v1' }],
          tiers: { header: 'x-tier', keys: [{ key: 'a', tier: 'gold' }, { tier: 'premium' }], trusted_sources: ['10.0.0.0/33'] },
        },
      ],
    });
    expect(tierIssues).toEqual([
      { path: 'models[0].tiers.trusted_sources[0]', message: 'expected an IP address or CIDR such as 10.0.0.0/8, got "10.0.0.0/33"' },
      { path: 'models[0].tiers.keys[0].tier', message: 'unknown tier "gold"; the tiers are premium, standard, best_effort' },
      { path: 'models[0].tiers.keys[1]', message: 'give exactly one of key or key_sha256' },
    ]);
    expect(
      issues({
        models: [
          {
            name: 'm',
            versions: [{ id: 'v1' }],
            tiers: {
              keys: [
                { key: 'a', tier: 'premium' },
                { key: 'a', tier: 'standard' },
              ],
            },
          },
        ],
      }),
    ).toEqual([{ path: 'models[0].tiers.keys[1]', message: 'this key is listed twice' }]);
    expect(issues({ models: [{ name: 'm', versions: [{ id: 'v1' }], tiers: { header: 'x-tier' } }] })).toEqual([
      { path: 'models[0].tiers.header', message: 'a tier header needs trusted_sources: the addresses (your auth proxy) whose header is believed' },
    ]);
  });
});

describe("a worker's request slots", () => {
  it("come from engine.max_num_seqs (a number or its digits), else the simulator's max_num_seqs, else only connections_per_worker", () => {
    const c = parseConfig({
      models: [
        {
          name: 'm',
          versions: [
            { id: 'a', engine: { max_num_seqs: 64 } },
            { id: 'b', engine: { max_num_seqs: '32' }, provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'] } },
            { id: 'c', provider: { kind: 'sim', sim: { max_num_seqs: 8 } } },
            { id: 'd', provider: { kind: 'static', endpoints: ['http://127.0.0.1:9'], resume: 'off' } },
            { id: 'e', provider: { kind: 'process', command: 'vllm serve {weights} --port {port}', token_id_prompts: false } },
          ],
        },
      ],
    });
    expect(c.models[0]!.versions.map((v) => engineTraitsOf(v))).toEqual([
      // the simulator has no token ids; other engines take them unless declared otherwise
      { resume: 'continue_final_message', tokenIdPrompts: false, maxNumSeqs: 64, maxLoras: 4 },
      { resume: 'continue_final_message', tokenIdPrompts: true, maxNumSeqs: 32, maxLoras: undefined },
      { resume: 'continue_final_message', tokenIdPrompts: false, maxNumSeqs: 8, maxLoras: 4 },
      { resume: 'off', tokenIdPrompts: true, maxNumSeqs: undefined, maxLoras: undefined },
      { resume: 'continue_final_message', tokenIdPrompts: false, maxNumSeqs: undefined, maxLoras: undefined },
    ]);
    expect(issues({ models: [{ name: 'm', versions: [{ id: 'v', engine: { max_num_seqs: 2.5 } }] }] })[0]?.message).toMatch(
      /max_num_seqs must be a positive integer: the engine's --max-num-seqs/,
    );
  });
});
