// The CLI's checks of what it is given, before anything is sent, through the built binary against a
// fake admin API on port 0: intervals past a day, sub-millisecond durations, an empty share and a
// token a header cannot carry are usage errors (exit 2) naming the flag or where the token came
// from; a 2xx answer that is not JSON is `invalid_response`, not a bare SyntaxError.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensureBuilt, gp } from './helpers.js';

let server: Server;
let url: string;
let dir: string;
/** Requests the fake API received (none may arrive before a usage error). */
let seen: string[] = [];
/** What GET /admin/v1/status answers. */
let statusBody = JSON.stringify({ models: [{ model: 'chat' }] });

beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'gp-cli-usage-'));
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    if (req.url === '/admin/v1/status') res.writeHead(200, { 'content-type': 'application/json' }).end(statusBody);
    else if (req.url === '/admin/v1/models/chat/deploy') res.writeHead(200, { 'content-type': 'text/event-stream' }).end('event: result\ndata: {not json\n\n');
    else res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no","type":"not_found_error","code":"not_found"}}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  seen = [];
  statusBody = JSON.stringify({ models: [{ model: 'chat' }] });
});

const env = () => ({ GLIDEPATH_URL: url, GLIDEPATH_TOKEN: 'gp_ok' });

describe('usage errors, before any request', () => {
  // regression: 3000000000 ms is past what a timer waits: the watch polled every ms
  it.each([
    [['canary', 'status', '--watch', '--interval', '3000000000'], 'error: --interval must be at most 86400000 ms (a day), got "3000000000"'],
    [['adapter', 'canary', 'status', 'a', '--watch', '--interval', '86400001'], 'error: --interval must be at most 86400000 ms (a day)'],
    [['rollout', 'status', '--watch', '--interval', '3000000000'], 'error: --interval must be at most 86400000 ms (a day)'],
    [['swap', '--drain-timeout', '3000000000'], 'error: --drain-timeout must be at most 86400000 ms (a day)'],
    // regression: 0.4ms rounded to 0 and was dropped without a word
    [['canary', 'start', '--version', 'v2', '--stage-duration', '0.4ms'], 'error: --stage-duration: expected a duration of at least 1ms, got "0.4ms"'],
    [
      ['adapter', 'canary', 'start', 'a', '/lora/a2', '--adapter-version', '2', '--stage-duration', '0.4ms'],
      'error: --stage-duration: expected a duration of at least 1ms',
    ],
    [['canary', 'start', '--version', 'v2', '--stage-duration', '600h'], 'error: --stage-duration: expected a duration of at most 2147483647 ms'],
    // regression: "" was read as 0
    [['canary', 'start', '--version', 'v2', '--shadow-share', ''], 'error: --shadow-share must be a number from 0 to 1, got ""'],
    [['canary', 'start', '--version', 'v2', '--stages', Array.from({ length: 21 }, (_, i) => i + 1).join(',')], 'error: --stages: at most 20 stages, got 21'],
  ])('%j', async (args, message) => {
    const r = await gp([...args, '--model', 'chat'], env());
    expect(r.stderr).toContain(message);
    expect(r.code).toBe(2);
    expect(seen).toEqual([]);
  });

  // regression: the HTTP client refused the header and the CLI said "is glidepath up running?"
  it('a token a header cannot carry names where it came from', async () => {
    const flag = await gp(['status', '--token', 'tök€n'], { GLIDEPATH_URL: url });
    expect(flag.stderr).toContain('error: --token: the token has "ö" at position 2; a bearer token is one word of visible ASCII characters');
    expect(flag.code).toBe(2);
    const envToken = await gp(['status'], { GLIDEPATH_URL: url, GLIDEPATH_TOKEN: 'gp_a\u0007b' });
    expect(envToken.stderr).toContain('error: GLIDEPATH_TOKEN: the token has a control character (U+0007) at position 5');
    expect(envToken.code).toBe(2);
    writeFileSync(join(dir, 'admin-token'), 'gp_a b\n');
    const fromFile = await gp(['status', '--data-dir', dir], { GLIDEPATH_URL: url });
    expect(fromFile.stderr).toContain(`error: the token file ${join(dir, 'admin-token')}: the token has " " at position 5`);
    expect(fromFile.code).toBe(2);
    expect(seen).toEqual([]);
  });
});

describe('answers that are not JSON', () => {
  it('a 2xx body that is not JSON is invalid_response naming the call', async () => {
    statusBody = '<html>a proxy</html>';
    const r = await gp(['status'], env());
    expect(r.stderr).toContain('error: the admin API at');
    expect(r.stderr).toContain('answered GET /status with a body that is not JSON ("<html>a proxy</html>")');
    expect(r.stderr).toContain('(invalid_response)');
    expect(r.stderr).not.toMatch(/SyntaxError/);
    expect(r.code).toBe(1);
  });

  it("a progress stream's event that is not JSON is invalid_response naming the event", async () => {
    const r = await gp(['deploy', 'green', '--version', 'v2', '--model', 'chat'], env());
    expect(r.stderr).toContain("answered the result event of POST /models/chat/deploy's progress stream with a body that is not JSON");
    expect(r.stderr).toContain('(invalid_response)');
    expect(r.code).toBe(1);
  });
});
