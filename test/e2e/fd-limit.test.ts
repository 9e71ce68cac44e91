// The gateway's own exhaustion is not blamed on workers (issue 12): `glidepath up` under a low
// descriptor limit admits client connections up to a ceiling derived from that limit, answers the
// rest 503 + Retry-After at once (never running out, never ejecting a worker), logs it once with
// the limit, and exports open and maximum descriptors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { cleanupAll, ensureBuilt, removeDir, simConfigYaml, startUp, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess } from '../helpers/e2e-up.js';
import { Raw } from '../helpers/raw.js';

const NOFILE = 320;
/** autoMaxConnections(320): (320 - 256 reserved) / 2. */
const CEILING = 32;

let dir: string;
let up: UpProcess;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir('fdlimit');
  const file = writeConfig(dir, simConfigYaml({ model: 'chat', versions: [{ id: 'v1', seed: 1, replicas: 2, interTokenMs: 50 }], dataDir: dir }));
  up = await startUp({ configFile: file, dataDir: dir, nofile: NOFILE, env: { GLIDEPATH_LOG_LEVEL: 'info' } });
});

afterAll(async () => {
  await up?.kill('SIGTERM');
  cleanupAll();
  if (dir) removeDir(dir);
});

describe('issue 12: near the descriptor limit', () => {
  it("the gateway's own exhaustion is not blamed on workers: 503 past the ceiling, logged once, descriptors exported", async () => {
    const port = Number(new URL(up.dataUrl).port);
    const body = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'a long story please' }], max_tokens: 4000, stream: true });
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    const clients: Raw[] = [];
    for (let i = 0; i < CEILING + 8; i++) {
      const c = new Raw(port).send(head + body);
      clients.push(c);
      // one at a time, so that which ones are refused is deterministic
      await c.until(() => c.text.includes('\r\n'), `a status line for client ${i}`);
    }
    const statuses = clients.map((c) => Number(c.text.slice(9, 12)));
    expect(statuses.slice(0, CEILING)).toEqual(Array(CEILING).fill(200));
    expect(statuses.slice(CEILING)).toEqual(Array(8).fill(503));
    const refused = clients[CEILING]!;
    await refused.close();
    expect(refused.text).toMatch(/retry-after: 1\r\n/);
    expect(refused.text).toMatch(/"code":"server_overloaded"/);
    const lines = up
      .stderr()
      .split('\n')
      .filter((l) => l.includes('at its ceiling'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, listener: 'data', reason: 'capacity', maxConnections: CEILING, fdLimit: NOFILE });

    for (const c of clients) c.socket.destroy();
    // below the ceiling again: served, and the numbers are on /metrics
    let text = '';
    for (let tries = 0; ; tries++) {
      const r = await request(`${up.dataUrl}/metrics`);
      text = await r.body.text();
      if (r.statusCode === 200 && /glidepath_client_connections\{listener="data"\} 1$/m.test(text)) break;
      if (tries > 200) throw new Error(`connections never drained:\n${text}`);
    }
    expect(text).toMatch(new RegExp(`^process_max_fds ${NOFILE}$`, 'm'));
    expect(text).toMatch(/^process_open_fds \d+$/m);
    expect(text).toMatch(new RegExp(`glidepath_client_connections_max\\{listener="data"\\} ${CEILING}$`, 'm'));
    expect(text).toMatch(/glidepath_client_refused_total\{listener="data",reason="capacity"\} 8$/m);
    expect(text).not.toMatch(/^glidepath_worker_ejections_total\{/m);
    const workers = await up.ok<{ routable: boolean }[]>('GET', '/workers');
    expect(workers.map((w) => w.routable)).toEqual([true, true]);
  });
});
