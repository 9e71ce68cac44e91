// The `process` provider with real child processes: command template, CUDA_VISIBLE_DEVICES, health
// wait, logs, SIGTERM then SIGKILL after the grace period, unexpected exits noticed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { parseConfig } from '../../../src/config/load.js';
import type { VersionConfig } from '../../../src/config/types.js';
import { ProcessProvider, renderCommand, splitCommand } from '../../../src/providers/process.js';
import { pidAlive } from '../../../src/providers/child.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'gp-proc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A tiny engine: serves /health and /env on the port it is given; optionally ignores SIGTERM.
const engine = path.join(dir, 'engine.mjs');
writeFileSync(
  engine,
  `import http from 'node:http';
const [port, mode] = process.argv.slice(2);
if (mode === 'stubborn') process.on('SIGTERM', () => console.log('ignoring SIGTERM'));
else process.on('SIGTERM', () => process.exit(0));
// 'crash' exits on its own only after /health has answered 200 (so start() has succeeded);
// 'early' exits before ever listening (so start() must fail).
if (mode === 'early') process.exit(3);
console.log('engine starting on', port);
http.createServer((req, res) => {
  // 'ready' answers its health on /ready only (a health_path other than /health), and has vLLM's sleep mode
  if (mode === 'ready') { const ok = req.url === '/ready' || (req.method === 'POST' && (req.url.startsWith('/sleep') || req.url === '/wake_up')); res.writeHead(ok ? 200 : 404); res.end(); return; }
  // 'loading' never finishes loading: its health is 503
  if (req.url === '/health' && mode === 'loading') { res.writeHead(503); res.end(); return; }
  if (req.url === '/health') { res.writeHead(200); res.end('ok', () => { if (mode === 'crash') setTimeout(() => process.exit(3), 50); }); return; }
  if (req.url === '/env') { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ gpus: process.env.CUDA_VISIBLE_DEVICES, extra: process.env.EXTRA })); return; }
  res.writeHead(404); res.end();
}).listen(Number(port), '127.0.0.1');
`,
);

function version(mode: string, grace = 500, healthPath = '/health'): VersionConfig {
  const cfg = parseConfig({
    gpus: { count: 4 },
    models: [
      {
        name: 'm',
        versions: [
          {
            id: 'v1',
            tp: 2,
            provider: {
              kind: 'process',
              command: `${process.execPath} ${engine} {port} ${mode}`,
              env: { EXTRA: 'yes' },
              grace_period_ms: grace,
              health_path: healthPath,
            },
          },
        ],
      },
    ],
  });
  return cfg.models[0]!.versions[0]!;
}

describe('process provider', () => {
  it('splits a command template without a shell and substitutes placeholders', () => {
    expect(splitCommand(`vllm serve "/w eights" --port {port}`)).toEqual(['vllm', 'serve', '/w eights', '--port', '{port}']);
    expect(
      renderCommand('vllm serve {weights} --port {port} --tensor-parallel-size {tp} --kv-role {kv_role} --kv-layout {kv_layout}', {
        weights: '/w',
        port: '9',
        tp: '4',
        model: 'm',
        version: 'v',
        host: 'h',
        gpus: '0,1',
        kv_role: 'kv_producer',
        kv_layout: 'c0ffee',
      }),
    ).toEqual(['vllm', 'serve', '/w', '--port', '9', '--tensor-parallel-size', '4', '--kv-role', 'kv_producer', '--kv-layout', 'c0ffee']);
    expect(() => renderCommand('x {nope}', { weights: '', port: '', tp: '', model: '', version: '', host: '', gpus: '', kv_role: '', kv_layout: '' })).toThrow(
      /unknown placeholder \{nope\}/,
    );
  });

  it('starts the engine with its GPUs and env, waits for /health, captures logs, stops it with SIGTERM', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    const h = await p.start({ version: version('normal'), workerId: 'm/v1/0', gpus: ['2', '3'], workDir: dir });
    const env = (await (await request(`${h.url}/env`)).body.json()) as { gpus: string; extra: string };
    expect(env).toEqual({ gpus: '2,3', extra: 'yes' });
    await p.stop(h);
    const exit = await h.exited;
    expect(exit).toMatchObject({ code: 0, expected: true });
    expect(readFileSync(h.info.logFile as string, 'utf8')).toMatch(/engine starting on \d+/);
  });

  it('SIGKILLs an engine that ignores SIGTERM after the grace period', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    const h = await p.start({ version: version('stubborn', 300), workerId: 'm/v1/1', gpus: ['0', '1'], workDir: dir });
    await p.stop(h);
    expect(await h.exited).toMatchObject({ signal: 'SIGKILL', expected: true });
  });

  it('notices an engine that exits on its own after becoming healthy (not expected)', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    const h = await p.start({ version: version('crash'), workerId: 'm/v1/2', gpus: ['0', '1'], workDir: dir });
    expect(await h.exited).toMatchObject({ code: 3, expected: false });
  });

  it('a start cancelled while its engine loads (the control plane shuts down) stops the engine and fails as worker_start_cancelled', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    const cancel = new AbortController();
    let pid = 0;
    const started = p.start({
      version: version('loading', 300),
      workerId: 'm/v1/5',
      gpus: ['0'],
      workDir: dir,
      signal: cancel.signal,
      onSpawn: (s) => {
        pid = s.pid;
        // the shutdown comes as the process exists, before it answered its health
        cancel.abort();
        return Promise.resolve();
      },
    });
    await expect(started).rejects.toMatchObject({ code: 'worker_start_cancelled' });
    expect(pid).toBeGreaterThan(0);
    expect(pidAlive(pid)).toBe(false);
    // and one cancelled before it began spawns nothing
    await expect(p.start({ version: version('normal'), workerId: 'm/v1/6', gpus: ['0'], workDir: dir, signal: cancel.signal })).rejects.toMatchObject({
      code: 'worker_start_cancelled',
    });
  });

  it('fails a start whose engine exits before it became healthy, naming the log', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    await expect(p.start({ version: version('early'), workerId: 'm/v1/3', gpus: ['0'], workDir: dir })).rejects.toThrow(
      /exited before it became healthy.*log: /,
    );
  });

  it('fails a start whose command does not exist, naming the command and the reason', async () => {
    const cfg = parseConfig({
      gpus: { count: 1 },
      models: [{ name: 'm', versions: [{ id: 'v1', provider: { kind: 'process', command: '/nonexistent/engine --port {port}' } }] }],
    });
    const p = new ProcessProvider({ startTimeoutMs: 5_000 });
    await expect(p.start({ version: cfg.models[0]!.versions[0]!, workerId: 'm/v1/0', gpus: ['0'], workDir: dir })).rejects.toThrow(
      /could not start \/nonexistent\/engine: spawn \/nonexistent\/engine ENOENT/,
    );
  });

  // Regression: wake waited for /health whatever the version's health_path, so an engine healthy
  // only on its own path never woke (the wait ran into its 15-minute limit).
  it('wakes an engine whose health_path is not /health: the wake waits on that path', async () => {
    const p = new ProcessProvider({ startTimeoutMs: 20_000 });
    const h = await p.start({ version: version('ready', 500, '/ready'), workerId: 'm/v1/4', gpus: ['0'], workDir: dir });
    try {
      await p.sleep(h, 1);
      const tooLong = new Promise((_, reject) => setTimeout(() => reject(new Error('wake still waiting after 5 s')), 5_000).unref());
      await expect(Promise.race([p.wake(h), tooLong])).resolves.toBeUndefined();
    } finally {
      await p.stop(h);
    }
  });
});
