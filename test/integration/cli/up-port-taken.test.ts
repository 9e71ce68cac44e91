// Regression: `up` loaded and warmed every worker before it found its port taken, then exited with
// a bare `listen EADDRINUSE`. It now checks both listen addresses first and says which is taken and
// by what flag or config key to change it.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAIN, ROOT, ensureBuilt } from './helpers.js';

let dir: string;
let taken: Server;
let port: number;

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'gp-port-'));
  // `npm start`'s fleet: examples/glidepath.yaml with its state in the temp dir
  const example = readFileSync(join(ROOT, 'examples/glidepath.yaml'), 'utf8');
  writeFileSync(join(dir, 'glidepath.yaml'), example.replace(/^(\s*data_dir:).*$/m, '$1 ./data'));
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  port = (taken.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function up(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, 'up', '--config', 'glidepath.yaml', ...args], { cwd: dir });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('up loads every worker before it finds its port taken', () => {
  it('--listen on a taken port: says which listener and how to change it, before loading any worker', async () => {
    const r = await up(['--listen', `127.0.0.1:${port}`, '--admin-listen', '127.0.0.1:0']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`error: the data plane cannot listen on 127.0.0.1:${port}: the port is already in use`);
    expect(r.stderr).toContain('--listen HOST:PORT or server.listen in the config');
    expect(r.stderr).not.toMatch(/EADDRINUSE/);
    // nothing was started: no worker, no progress line, no state written
    expect(r.stderr).not.toMatch(/simulator pid|loading weights|warming up|serving/);
    expect(existsSync(join(dir, 'data'))).toBe(false);
  });

  it('--admin-listen on a taken port names the admin listener and its flag and key', async () => {
    const r = await up(['--listen', '127.0.0.1:0', '--admin-listen', `127.0.0.1:${port}`]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`error: the admin API cannot listen on 127.0.0.1:${port}: the port is already in use`);
    expect(r.stderr).toContain('--admin-listen HOST:PORT or server.admin_listen in the config');
    expect(r.stderr).not.toMatch(/simulator pid|loading weights/);
  });

  it('both listeners on one address is refused up front', async () => {
    // a free port: bound, released, then given to both
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const free = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const r = await up(['--listen', `127.0.0.1:${free}`, '--admin-listen', `127.0.0.1:${free}`]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`error: the data plane and the admin API cannot both listen on 127.0.0.1:${free}`);
    expect(r.stderr).not.toMatch(/simulator pid|loading weights/);
  });
});
