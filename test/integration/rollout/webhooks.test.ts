// notify(): real HTTP to a local webhook receiver on 127.0.0.1 port 0.
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EventBus } from '../../../src/control/events.js';
import type { ControlEvent } from '../../../src/control/events.js';
import { notify } from '../../../src/rollout/webhooks.js';
import { redactUrl } from '../../../src/http/url.js';
import { openMemoryStore } from '../../../src/store/sqlite.js';

interface Hit {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

/** A webhook receiver; `answer` decides each response by hit number (1-based). */
async function receiver(answer: (n: number, res: ServerResponse) => void): Promise<{ url: string; hits: Hit[]; server: Server }> {
  const hits: Hit[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      hits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: text ? (JSON.parse(text) as unknown) : undefined });
      answer(hits.length, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits, server };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise((r) => {
          s.closeAllConnections();
          s.close(r);
        }),
    ),
  );
});

const ok = (_n: number, res: ServerResponse) => res.writeHead(204).end();
const noSleep = () => Promise.resolve();

describe('notify', () => {
  it('POSTs {kind, model, version, message, data, at} as JSON to every webhook', async () => {
    const a = await receiver(ok);
    const b = await receiver((_n, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks'));
    const at = Date.UTC(2026, 0, 2, 3, 4, 5);
    const res = await notify([`${a.url}/hook`, `${b.url}/other`], {
      kind: 'monitored_rollback',
      model: 'llama',
      version: 'v1',
      message: 'rolled back',
      data: { error_rate: 0.08 },
      at,
    });
    expect(res.map((r) => [r.ok, r.status, r.attempts])).toEqual([
      [true, 204, 1],
      [true, 200, 1],
    ]);
    for (const s of [a, b]) {
      expect(s.hits).toHaveLength(1);
      expect(s.hits[0]?.method).toBe('POST');
      expect(s.hits[0]?.headers['content-type']).toBe('application/json');
      expect(s.hits[0]?.body).toEqual({
        kind: 'monitored_rollback',
        model: 'llama',
        version: 'v1',
        message: 'rolled back',
        data: { error_rate: 0.08 },
        at: '2026-01-02T03:04:05.000Z',
      });
    }
    expect(a.hits[0]?.url).toBe('/hook');
  });

  it('retries 5xx with exponential back-off, then succeeds', async () => {
    const s = await receiver((n, res) => res.writeHead(n < 3 ? 503 : 200).end());
    const waits: number[] = [];
    const [r] = await notify([s.url], { kind: 'k', message: 'm' }, { attempts: 3, backoffMs: 100, sleep: (ms) => Promise.resolve(void waits.push(ms)) });
    expect(r).toMatchObject({ ok: true, status: 200, attempts: 3 });
    expect(waits).toEqual([100, 200]);
    expect(s.hits[0]?.body).toMatchObject({ model: null, version: null, data: null });
  });

  it('does not retry a 4xx answer (other than 408/425/429) and gives up after the bounded attempts', async () => {
    const four = await receiver((_n, res) => res.writeHead(404).end());
    const five = await receiver((_n, res) => res.writeHead(500).end());
    const [r4, r5] = await notify([four.url, five.url], { kind: 'k', message: 'm' }, { attempts: 3, sleep: noSleep });
    expect(r4).toMatchObject({ ok: false, status: 404, attempts: 1, error: 'answered HTTP 404' });
    expect(r5).toMatchObject({ ok: false, status: 500, attempts: 3, error: 'answered HTTP 500' });
    expect(five.hits).toHaveLength(3);
  });

  it('times out a webhook that never answers, and an unreachable one fails without throwing', async () => {
    const hang = await receiver(() => undefined);
    const closed = await receiver(ok);
    const deadUrl = closed.url;
    await new Promise((r) => closed.server.close(r));
    const [h, d] = await notify([hang.url, deadUrl], { kind: 'k', message: 'm' }, { attempts: 2, timeoutMs: 100, sleep: noSleep });
    expect(h).toMatchObject({ ok: false, attempts: 2, error: 'timed out after 100 ms' });
    expect(hang.hits).toHaveLength(2);
    expect(d?.ok).toBe(false);
    expect(d?.attempts).toBe(2);
    expect(d?.error).toMatch(/ECONNREFUSED|connect/i);
  });

  it('records every outcome as an event and in the audit log, with the URL redacted', async () => {
    const good = await receiver(ok);
    const bad = await receiver((_n, res) => res.writeHead(500).end());
    const store = openMemoryStore();
    const events = new EventBus();
    const seen: ControlEvent[] = [];
    events.subscribe((e) => seen.push(e));
    await notify(
      [`${good.url}/h?token=secret`, `http://user:pw@127.0.0.1:${new URL(bad.url).port}/x`],
      { kind: 'monitored_rollback', model: 'llama', version: 'v1', message: 'm' },
      { attempts: 1, events, audit: store },
    );
    expect(seen.map((e) => e.kind)).toEqual(['notification', 'notification_failed']);
    expect(JSON.stringify(seen)).not.toContain('secret');
    const audit = await store.queryAudit({ action: 'notify' });
    expect(audit.map((a) => [a.actor, a.result, a.errorCode])).toEqual(
      expect.arrayContaining([
        ['notify', 'ok', undefined],
        ['notify', 'error', 'webhook_refused'],
      ]),
    );
    expect(audit.map((a) => a.target).sort()).toEqual([`${bad.url}/x`, `${good.url}/h`].sort());
    expect(bad.hits[0]?.headers.authorization).toBe(`Basic ${Buffer.from('user:pw').toString('base64')}`);
    await store.close();
  });

  it('no webhooks: resolves to nothing; unserialisable data still sends the message', async () => {
    expect(await notify([], { kind: 'k', message: 'm' })).toEqual([]);
    const s = await receiver(ok);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const [r] = await notify([s.url], { kind: 'k', message: 'still here', data: cyclic });
    expect(r?.ok).toBe(true);
    expect(s.hits[0]?.body).toMatchObject({ message: 'still here', data: { unserializable: expect.stringContaining('circular') as unknown } });
  });

  it('redactUrl drops credentials and query strings', () => {
    expect(redactUrl('https://u:p@hooks.example.com/a/b?token=x#f')).toBe('https://hooks.example.com/a/b');
    expect(redactUrl('not a url')).toBe('(invalid url)');
  });
});
