// The gateway's own resource exhaustion, provoked for real: this test's process (vitest runs each
// file in a process of its own) lowers its own RLIMIT_NOFILE with prlimit and uses up the rest, so
// the gateway's connects to workers fail with a genuine EMFILE.
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readdirSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { localResourceLog } from '../../../src/gateway/local.js';
import { chatReq, gatewayFixtures, oneModel } from '../../helpers/gateway.js';

const { upstream, gateway } = gatewayFixtures();

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
}

/** One request over `agent`'s kept-alive connection (no new descriptor needed on either side). */
function send(url: string, agent: Agent, method: string, path: string, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = httpRequest(url + path, { method, agent, headers: payload === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

function softLimit(): number {
  return Number(execFileSync('prlimit', ['--pid', String(process.pid), '--nofile', '--output', 'SOFT', '--noheadings'], { encoding: 'utf8' }).trim());
}

function setSoftLimit(n: number): void {
  // soft limit only (`N:`): it can be raised back up to the hard one afterwards
  execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:`]);
}

/** Run `fn` with no descriptor left to this process; everything is given back afterwards. */
async function withoutDescriptors<T>(fn: () => Promise<T>): Promise<T> {
  const before = softLimit();
  setSoftLimit(readdirSync('/proc/self/fd').length + 64);
  const fillers: number[] = [];
  try {
    for (;;) {
      try {
        fillers.push(openSync('/dev/null', 'r'));
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe('EMFILE');
        break;
      }
      if (fillers.length > 1000) throw new Error('prlimit did not lower the descriptor limit');
    }
    return await fn();
  } finally {
    for (const fd of fillers) closeSync(fd);
    setSoftLimit(before);
  }
}

describe("the gateway's own limits", () => {
  it("the gateway's own descriptor exhaustion is not blamed on workers", async () => {
    const workers = [await upstream(), await upstream(), await upstream(), await upstream()];
    const lines: string[] = [];
    const gw = await gateway(
      oneModel(workers.map((w) => w.url)),
      {},
      { onLocalResourceError: localResourceLog(pino({}, { write: (line: string) => lines.push(line) })) },
    );
    // client connections opened, and accepted by the gateway, while descriptors are still there
    const agents = [0, 1, 2].map(() => new Agent({ keepAlive: true, maxSockets: 1 }));
    for (const a of agents) expect((await send(gw.url, a, 'GET', '/health')).status).toBe(200);

    const answers = await withoutDescriptors(async () => {
      const out: Answer[] = [];
      for (const a of agents) out.push(await send(gw.url, a, 'POST', '/v1/chat/completions', chatReq()));
      return out;
    });

    for (const r of answers) {
      expect(r.status).toBe(503);
      expect(r.retryAfter).toBe('5');
      const err = (JSON.parse(r.body) as { error: { code: string; type: string; message: string } }).error;
      expect(err).toMatchObject({ code: 'local_resources_exhausted', type: 'unavailable_error' });
      expect(err.message).toMatch(/EMFILE/);
      expect(err.message).toMatch(/the gateway's own limit, not the worker's/);
    }
    // no worker was ejected, none was even reached, and nothing was retried
    const pool = gw.dp.pool('m', 'v1');
    expect(pool.workers.map((w) => [w.ejectedUntil, w.connectFailures])).toEqual([
      [0, 0],
      [0, 0],
      [0, 0],
      [0, 0],
    ]);
    expect(workers.map((w) => w.requests.length)).toEqual([0, 0, 0, 0]);
    const text = await gw.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_local_resource_errors_total{kind="EMFILE"} 3');
    expect(text).not.toContain('glidepath_worker_ejections_total{');
    expect(text).not.toMatch(/glidepath_upstream_retries_total\{[^}]*\} [1-9]/);
    // one line for the episode, not one per request
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/EMFILE.*not the worker's/);
    // and with descriptors back every worker serves at once
    const after = await send(gw.url, agents[0]!, 'POST', '/v1/chat/completions', chatReq());
    expect(after.status).toBe(200);
    for (const a of agents) a.destroy();
  });
});
