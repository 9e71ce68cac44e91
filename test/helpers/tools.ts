// Tests that need a program from a Debian package (promtool, script…): they run where the program is
// installed; elsewhere they are skipped with one printed line naming the package, so that `npm test`
// passes right after `npm install` on a fresh machine. Under CI (`.ci/run` sets CI=true and installs
// every package) a missing program is a failure instead, so CI never passes by skipping.
import { it } from 'vitest';
import type { TestOptions } from 'vitest';
import { findTool } from './find-tool.js';

/** The programs the tests use that `npm install` does not bring, and the Debian package of each. */
export const OPTIONAL_TOOLS = {
  /** validates the gateway's and the simulator's /metrics exposition */
  promtool: 'prometheus',
  /** the Prometheus server: the canary judge and the monitor reading their series by PromQL (docs/cluster.md) */
  prometheus: 'prometheus',
  /** script(1): a pseudo-terminal for the CLI's confirmation prompt */
  script: 'bsdutils',
  /** the cluster store's backend (src/store/kv/etcd.ts) */
  etcd: 'etcd-server',
  /** the browser the dashboard's end-to-end tests and screenshots drive (playwright-core cannot download one here) */
  chromium: 'chromium',
} as const;

export { findTool };

/** CI=true (or 1): a missing tool fails the test instead of skipping it. */
export function isCi(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.CI === 'true' || env.CI === '1';
}

export type ToolCheck = { run: true; path: string } | { run: false; skip: string } | { run: false; fail: string };

/** Pure decision: run (installed), skip (with the line to print), or fail (missing under CI). */
export function checkTool(name: string, pkg: string, env: NodeJS.ProcessEnv = process.env): ToolCheck {
  const path = findTool(name, env.PATH ?? '');
  if (path !== undefined) return { run: true, path };
  if (isCi(env))
    return { run: false, fail: `${name} is not installed (apt-get install ${pkg}); CI=true requires every optional test tool (.ci/run installs them)` };
  return { run: false, skip: `skipped: ${name} not installed (apt-get install ${pkg})` };
}

type TestBody = () => unknown;
/** `options`: a timeout in ms, or vitest's options (a timeout, retries). */
export type ToolIt = (title: string, fn: TestBody, options?: number | TestOptions) => void;

const announced = new Set<string>();

/**
 * `it` for tests that need the program `name` from Debian package `pkg`. Installed: the test runs.
 * Missing: the test is skipped and one line says what to install (once per test file), or under CI
 * the test fails with that message.
 */
export function itWithTool(name: string, pkg: string): ToolIt {
  return itFor(name, checkTool(name, pkg));
}

/**
 * `it` for tests that need something other than a program on PATH (`name`, `missing`: how its
 * absence reads, `hint`: how to get it): available, the test runs; else it is skipped with one line
 * (`skipped: <name> <missing> (<hint>)`), or under CI failed.
 */
export function itWhen(available: boolean, name: string, missing: string, hint: string, env: NodeJS.ProcessEnv = process.env): ToolIt {
  const check: ToolCheck = available
    ? { run: true, path: name }
    : isCi(env)
      ? { run: false, fail: `${name} ${missing} (${hint}); CI=true requires it (.ci/run provides it)` }
      : { run: false, skip: `skipped: ${name} ${missing} (${hint})` };
  return itFor(name, check);
}

/** `it` for tests that need the llama.cpp binding (node-llama-cpp, installed apart into engine/; .ci/run installs it). */
export function itWithEngine(installed: boolean, env: NodeJS.ProcessEnv = process.env): ToolIt {
  return itWhen(installed, 'node-llama-cpp', 'not installed', 'npm run engine:install', env);
}

function itFor(name: string, check: ToolCheck): ToolIt {
  if (check.run) return (title, fn, options) => it(title, fn, options);
  if ('fail' in check) {
    const message = check.fail;
    return (title) =>
      it(title, () => {
        throw new Error(message);
      });
  }
  if (!announced.has(name)) {
    announced.add(name);
    process.stderr.write(`${check.skip}\n`);
  }
  return (title, fn, options) => it.skip(title, fn, options);
}
