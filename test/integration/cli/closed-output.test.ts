// Regression: `glidepath status | head -2` died of EPIPE with a stack trace. A reader that closes the
// CLI's output early has what it wanted: the CLI ends quietly (exit 0); `up` keeps serving.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIN, startUp } from './helpers.js';
import type { Up } from './helpers.js';

const CONFIG = `
gpus: { count: 2, memory_gb: 80 }
models:
  - name: chat
    versions:
      - id: v1
        provider: { kind: sim, sim: { seed: 1, inter_token_ms: 0 } }
    route: { weights: { v1: 1 } }
`;

let up: Up;
beforeAll(async () => {
  up = await startUp(CONFIG);
});
afterAll(async () => {
  await up.stop();
});

/** Run the CLI with its stdout a pipe whose reading end is already closed (as after `| head -2`). */
function gpIntoClosedPipe(args: readonly string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: tmpdir(),
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, GLIDEPATH_URL: up.adminUrl, GLIDEPATH_DATA_DIR: up.dataDir },
    });
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stderr }));
  });
}

describe('glidepath status | head -2 dies with an EPIPE stack trace', () => {
  it('status into a closed pipe ends quietly: exit 0, nothing on stderr', async () => {
    const r = await gpIntoClosedPipe(['status']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('help and --output json into a closed pipe end quietly too', async () => {
    for (const args of [['--help'], ['status', '-o', 'json']]) {
      const r = await gpIntoClosedPipe(args);
      expect(r.stderr, args.join(' ')).toBe('');
      expect(r.code, args.join(' ')).toBe(0);
    }
  });

  it('a failing command into a closed pipe keeps its exit code', async () => {
    const r = await gpIntoClosedPipe(['status', '--model', 'nope']);
    expect(r.stderr).toMatch(/^error: model "nope" is not served/);
    expect(r.code).toBe(1);
  });

  it('up with its stdout closed keeps serving (and stops on SIGTERM)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gp-closed-'));
    try {
      writeFileSync(join(dir, 'glidepath.yaml'), CONFIG);
      const child = spawn(
        process.execPath,
        [MAIN, 'up', '--config', 'glidepath.yaml', '--data-dir', 'data', '--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0'],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child.stdout.destroy();
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      let log = '';
      const dataUrl = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stderr }).on('line', (l) => {
          log += `${l}\n`;
          const m = /^glidepath: data plane (\S+)/.exec(l);
          if (m) resolve(m[1]!);
        });
        void exited.then((code) => reject(new Error(`up exited with ${code}:\n${log}`)));
      });
      // the "Try it" lines go to stdout in the same tick as the listening line, and the EPIPE
      // comes back on the next one: by the time /health answers, up has met the closed pipe
      const health = await fetch(`${dataUrl}/health`);
      expect(health.status).toBe(200);
      expect(child.exitCode, log).toBeNull();
      child.kill('SIGTERM');
      expect(await exited, log).toBe(0);
      expect(log).not.toMatch(/EPIPE|\n\s+at /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
