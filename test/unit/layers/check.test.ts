// The import-direction checker (scripts/layers) on fixture trees: each violation names its file,
// line, import and rule; a cycle is reported with its path; the allow-list can only shrink.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildGraph, check, CYCLE_RULE, formatReport, readTree } from '../../../scripts/layers/check.js';
import type { Allowance, Rule } from '../../../scripts/layers/check.js';
import { ALLOWED, RULES } from '../../../scripts/layers/rules.js';

/** A fixture tree: path under src → source text. */
type Tree = Record<string, string>;
const graphOf = (tree: Tree) => buildGraph(Object.entries(tree).map(([p, text]) => ({ path: p, text })));

const PURE: Rule = { id: 'pure', files: ['domain'], mayImportOnly: ['domain'], why: 'domain imports nothing of ours' };
const NO_UP: Rule = { id: 'no-up', files: ['gateway'], mayNotImport: ['control', 'better-sqlite3', 'node:child_process'], why: 'the data plane stands alone' };

describe('rules', () => {
  it('reports a violation with its file, line, import and rule', () => {
    const g = graphOf({
      'domain/version.ts': "// header\nimport type { VersionConfig } from '../config/types.js';\nexport const x = 1;\n",
      'config/types.ts': 'export interface VersionConfig { id: string }\n',
    });
    const r = check(g, [PURE]);
    expect(r.violations).toEqual([
      {
        rule: 'pure',
        file: 'domain/version.ts',
        line: 2,
        target: 'config/types.ts',
        specifier: '../config/types.js',
        typeOnly: true,
        why: 'domain imports nothing of ours',
      },
    ]);
    expect(formatReport(r, 'src', 'rules.ts')).toEqual([
      'src/domain/version.ts:2: pure: imports types from ../config/types.js (config/types.ts) — domain imports nothing of ours',
    ]);
  });

  it('type-only imports, re-exports and dynamic imports count; imports inside the allowed folders do not', () => {
    const g = graphOf({
      'gateway/a.ts':
        "import type { P } from '../control/plane.js';\nexport { q } from '../control/q.js';\nexport const f = () => import('../control/lazy.js');\nimport { b } from './b.js';\n",
      'gateway/b.ts': 'export const b = 1;\n',
      'control/plane.ts': 'export interface P { n: number }\n',
      'control/q.ts': 'export const q = 1;\n',
      'control/lazy.ts': 'export const l = 1;\n',
    });
    expect(check(g, [NO_UP]).violations.map((v) => [v.line, v.target, v.typeOnly])).toEqual([
      [1, 'control/plane.ts', true],
      [2, 'control/q.ts', false],
      [3, 'control/lazy.ts', false],
    ]);
  });

  it('packages are refused by name, node builtins with or without node:', () => {
    const g = graphOf({
      'gateway/db.ts':
        "import Database from 'better-sqlite3';\nimport { spawn } from 'child_process';\nimport { request } from 'undici';\nimport { readFileSync } from 'node:fs';\n",
    });
    expect(check(g, [NO_UP]).violations.map((v) => `${v.line} ${v.target}`)).toEqual(['1 better-sqlite3', '2 node:child_process']);
  });

  it('a folder selector takes its subfolders, a file selector only itself; except leaves files out', () => {
    const rule: Rule = { id: 'only-store', files: ['*'], except: ['store'], mayNotImport: ['defaults.ts', 'gateway/http1'], why: 'w' };
    const g = graphOf({
      'store/s.ts': "import { D } from '../defaults.js';\n",
      'fleet/f.ts': "import { D } from '../defaults.js';\nimport { h } from '../gateway/http1/host.js';\nimport { p } from '../gateway/proxy.js';\n",
      'defaults.ts': 'export const D = 1;\n',
      'gateway/http1/host.ts': 'export const h = 1;\n',
      'gateway/proxy.ts': 'export const p = 1;\n',
    });
    expect(check(g, [rule]).violations.map((v) => `${v.file}:${v.line}`)).toEqual(['fleet/f.ts:1', 'fleet/f.ts:2']);
  });

  it('mayNotMention finds string literals and template text, not module specifiers', () => {
    const rule: Rule = { id: 'admin', files: ['*'], except: ['providers'], mayNotMention: [/^\/sleep\b/], why: 'w' };
    const g = graphOf({
      'control/w.ts': "const level = 1;\nexport const a = `/sleep?level=${level}`;\nexport const b = 'sleep:model/v1';\nexport type T = '/sleep';\n",
      'providers/p.ts': "export const a = '/sleep';\n",
    });
    expect(check(g, [rule]).violations.map((v) => `${v.file}:${v.line} ${v.target}`)).toEqual(['control/w.ts:2 /sleep?level=', 'control/w.ts:4 /sleep']);
  });

  it('an import that names no file of the tree is reported', () => {
    const r = check(graphOf({ 'a.ts': "import { x } from './missing.js';\n" }), []);
    expect(formatReport(r, 'src', 'rules.ts')).toEqual(['src/a.ts:1: cannot resolve "./missing.js"']);
  });
});

describe('cycles', () => {
  it('reports a file-level cycle with its path, type-only imports included', () => {
    const g = graphOf({
      'gateway/proxy.ts': "import { deliver } from './shadow.js';\n",
      'gateway/shadow.ts': "import type { ProxyContext } from './proxy.js';\n",
      'gateway/sse.ts': 'export const s = 1;\n',
    });
    const r = check(g, []);
    expect(r.cycles).toEqual([{ path: ['gateway/proxy.ts', 'gateway/shadow.ts', 'gateway/proxy.ts'], files: ['gateway/proxy.ts', 'gateway/shadow.ts'] }]);
    expect(formatReport(r, 'src', 'rules.ts')).toEqual(['no-cycles: src/gateway/proxy.ts → src/gateway/shadow.ts → src/gateway/proxy.ts']);
  });

  it('gives the shortest cycle and names the rest of the tangle; a self-import is a cycle', () => {
    const g = graphOf({
      'a.ts': "import './b.js';\n",
      'b.ts': "import './c.js';\nimport './a.js';\n",
      'c.ts': "import './a.js';\n",
      'self.ts': "import './self.js';\n",
    });
    const r = check(g, []);
    expect(r.cycles.map((c) => c.path)).toEqual([
      ['a.ts', 'b.ts', 'a.ts'],
      ['self.ts', 'self.ts'],
    ]);
    expect(formatReport(r, 'src', 'rules.ts')[0]).toBe('no-cycles: src/a.ts → src/b.ts → src/a.ts (the same tangle also holds src/c.ts)');
  });
});

describe('the allow-list only shrinks', () => {
  const tree: Tree = {
    'domain/a.ts': "import { c } from '../config/c.js';\n",
    'config/c.ts': "import type { A } from '../domain/a.js';\nexport const c = 1;\n",
  };

  it('allowed edges are not reported, cycles through an allowed edge neither', () => {
    const allowed: Allowance[] = [
      { rule: 'pure', from: 'domain/a.ts', to: 'config/c.ts' },
      { rule: CYCLE_RULE, from: 'domain/a.ts', to: 'config/c.ts' },
    ];
    const r = check(graphOf(tree), [PURE], allowed);
    expect(r).toEqual({ violations: [], cycles: [], stale: [], unresolved: [] });
  });

  it('an entry that no longer happens fails the check, and says to remove it', () => {
    const fixed = { ...tree, 'domain/a.ts': 'export interface A { n: number }\n' };
    const allowed: Allowance[] = [
      { rule: 'pure', from: 'domain/a.ts', to: 'config/c.ts' },
      { rule: CYCLE_RULE, from: 'domain/a.ts', to: 'config/c.ts' },
    ];
    const r = check(graphOf(fixed), [PURE], allowed);
    expect(r.stale).toEqual(allowed);
    expect(formatReport(r, 'src', 'scripts/layers/rules.ts')).toEqual([
      'scripts/layers/rules.ts: allowed pure domain/a.ts → config/c.ts no longer happens: remove it from the allow-list',
      'scripts/layers/rules.ts: allowed no-cycles domain/a.ts → config/c.ts no longer happens: remove it from the allow-list',
    ]);
  });

  it('a cycle entry whose edge remains but whose cycle was broken elsewhere is stale too', () => {
    const broken = { ...tree, 'config/c.ts': 'export const c = 1;\n' };
    const r = check(graphOf(broken), [], [{ rule: CYCLE_RULE, from: 'domain/a.ts', to: 'config/c.ts' }]);
    expect(r.stale).toHaveLength(1);
  });
});

describe("the project's rules (scripts/layers/rules.ts)", () => {
  // one fixture per rule: the import DESIGN.md forbids, and the rule that must catch it
  const cases: [string, string, string][] = [
    ['domain/version.ts', "import type { V } from '../config/types.js';", 'domain-is-pure'],
    ['config/load.ts', "import { f } from '../sim/options.js';", 'config-is-foundation'],
    ['sim/http.ts', "import { readBody } from '../gateway/request.js';", 'sim-stands-alone'],
    ['http/body.ts', "import { x } from '../gateway/request.js';", 'http-is-foundation'],
    ['gateway/proxy.ts', "import { judge } from '../analysis/judge.js';", 'data-plane-stands-alone'],
    ['gateway/server.ts', "import type { App } from '../control/app.js';", 'data-plane-stands-alone'],
    ['fleet/cache.ts', "import { redactUrl } from '../control/notify.js';", 'controllers-see-ports'],
    ['health/probe.ts', "import type { ControlPlane } from '../control/plane.js';", 'controllers-see-ports'],
    ['rollout/canary.ts', "import type { RouteDef } from '../api/router.js';", 'controllers-see-ports'],
    ['control/plane.ts', "import Database from 'better-sqlite3';", 'database-in-store'],
    ['cli/up/index.ts', "import { spawn } from 'node:child_process';", 'processes-in-providers'],
    ['fleet/lora.ts', "export const path = '/v1/load_lora_adapter';", 'engine-admin-in-providers'],
  ];
  const targets: Tree = {
    'config/types.ts': '',
    'sim/options.ts': '',
    'gateway/request.ts': '',
    'analysis/judge.ts': '',
    'control/app.ts': '',
    'control/notify.ts': '',
    'control/plane.ts': '',
    'api/router.ts': '',
  };

  it.each(cases)('%s: %s → %s', (file, line, rule) => {
    const r = check(graphOf({ ...targets, [file]: `${line}\n` }), RULES);
    expect(r.violations.filter((v) => v.file === file).map((v) => v.rule)).toEqual([rule]);
  });

  it('what the layers allow passes', () => {
    const ok: Tree = {
      'domain/spec.ts': "import type { A } from './card.js';\n",
      'domain/card.ts': 'export type A = 1;\n',
      'config/load.ts': "import { DEFAULTS } from '../defaults.js';\nimport type { A } from '../domain/card.js';\nimport { z } from 'zod';\n",
      'defaults.ts': '',
      'sim/http.ts': "import { readBody } from '../http/body.js';\nimport { ArrayHistogram } from '../telemetry/prom.js';\nexport const p = '/sleep';\n",
      'http/body.ts': "import { E } from '../errors.js';\n",
      'errors.ts': '',
      'telemetry/prom.ts': '',
      'store/sqlite.ts': "import Database from 'better-sqlite3';\n",
      'providers/child.ts': "import { spawn } from 'node:child_process';\nexport const w = '/wake_up';\n",
      'cli/up.ts': "import { startGlidepath } from '../control/app.js';\n",
      'control/app.ts': "import { c } from '../fleet/cache.js';\n",
      'fleet/cache.ts': "import { redactUrl } from '../http/url.js';\n",
      'http/url.ts': '',
    };
    expect(check(graphOf(ok), RULES)).toEqual({ violations: [], cycles: [], stale: [], unresolved: [] });
  });

  it('src/ holds them, with the allow-list as it stands (the same check as npm run lint)', () => {
    const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../src');
    expect(formatReport(check(buildGraph(readTree(src)), RULES, ALLOWED), 'src', 'scripts/layers/rules.ts')).toEqual([]);
  });
});

describe('readTree', () => {
  it('reads every .ts file under the root with / paths, declaration files left out', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-layers-'));
    try {
      mkdirSync(path.join(dir, 'gateway', 'http1'), { recursive: true });
      writeFileSync(path.join(dir, 'gateway', 'http1', 'head.ts'), "import '../sse.js';\n");
      writeFileSync(path.join(dir, 'gateway', 'sse.ts'), '');
      writeFileSync(path.join(dir, 'types.d.ts'), '');
      writeFileSync(path.join(dir, 'notes.md'), '');
      const files = readTree(dir);
      expect(files.map((f) => f.path)).toEqual(['gateway/http1/head.ts', 'gateway/sse.ts']);
      expect(buildGraph(files).imports.get('gateway/http1/head.ts')?.[0]?.target).toBe('gateway/sse.ts');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
