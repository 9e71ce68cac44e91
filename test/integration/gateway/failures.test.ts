// Upstream failures: retries before the first byte, ejection, timeouts, broken and garbage streams.
import { describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import {
  chatBody,
  closedPort,
  destroyAfter,
  hang,
  hangAfterHeaders,
  invalidJson,
  json,
  raw,
  resetBeforeAnswer,
  sseEvents,
  status,
  stream,
  truncated,
} from '../../helpers/upstream.js';
import { chatReq, post, sseData, gatewayFixtures, twoVersions } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';

const { upstream, gateway } = gatewayFixtures();
function records(gw: Gateway): RequestRecord[] {
  const out: RequestRecord[] = [];
  gw.telemetry.subscribe((r) => out.push(r));
  return out;
}
/** Round-robin so the first attempt deterministically goes to the first worker. */
const rr = () => ({ picker: new RoundRobinPicker() });

describe('retries before the first byte', () => {
  it('retries a 5xx on another worker of the same pool; the client sees success', async () => {
    const bad = await upstream();
    const good = await upstream();
    bad.setDefault(status(503));
    good.setDefault(json(chatBody('ok')));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [bad.url, good.url] }], route: { weights: { v1: 1 } } }], {}, rr());
    const recs = records(gw);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w1');
    expect(bad.requests).toHaveLength(1);
    expect(good.requests).toHaveLength(1);
    expect(recs[0]).toMatchObject({ status: 200, retries: 1, worker: 'v1-w1' });
    // a 5xx answer is not a refused connection: no ejection
    expect(gw.dp.pool('m', 'v1').workers[0]!.ejectedUntil).toBe(0);
    expect(await gw.telemetry.metrics.registry.metrics()).toContain('glidepath_upstream_retries_total{model="m",version="v1"} 1');
  });

  it('retries a streaming request whose worker answers 500 before streaming', async () => {
    const bad = await upstream();
    const good = await upstream();
    bad.setDefault(status(500));
    const events = sseEvents(4);
    good.setDefault(stream(events));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [bad.url, good.url] }], route: { weights: { v1: 1 } } }], {}, rr());
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.body).toBe(events.join(''));
  });

  it('retries a refused connection on another worker and ejects the refusing one until its back-off passes', async () => {
    const port = await closedPort();
    const good = await upstream();
    const gw = await gateway(
      [{ name: 'm', versions: [{ id: 'v1', workers: [`http://127.0.0.1:${port}`, good.url] }], route: { weights: { v1: 1 } } }],
      { ejectBaseMs: 60_000, ejectMaxMs: 600_000 },
      rr(),
    );
    const recs = records(gw);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w1');
    expect(recs[0]).toMatchObject({ status: 200, retries: 1 });
    const dead = gw.dp.pool('m', 'v1').workers[0]!;
    expect(dead.ejectedUntil).toBeGreaterThan(Date.now());
    // later requests skip it: every one lands on the good worker on the first try
    for (let i = 0; i < 4; i++) {
      const again = await post(gw.url, chatReq());
      expect(again.headers['x-glidepath-worker']).toBe('v1-w1');
    }
    expect(recs.slice(1).map((x) => x.retries)).toEqual([0, 0, 0, 0]);
    expect(good.requests).toHaveLength(5);
    expect(await gw.telemetry.metrics.registry.metrics()).toContain('glidepath_worker_ejections_total{model="m",version="v1",worker="v1-w0"} 1');
    // once the back-off has passed, it is tried again (and ejected for twice as long)
    dead.ejectedUntil = Date.now() - 1;
    const retry = await post(gw.url, chatReq());
    expect(retry.status).toBe(200);
    expect(dead.connectFailures).toBe(2);
    expect(dead.ejectedUntil - Date.now()).toBeGreaterThan(60_000);
  });

  it('retries when the worker resets the connection before answering', async () => {
    const bad = await upstream();
    const good = await upstream();
    bad.setDefault(resetBeforeAnswer());
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [bad.url, good.url] }], route: { weights: { v1: 1 } } }], {}, rr());
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w1');
  });

  // regression: a worker that dropped the request was reported as "could not connect to worker (ECONNRESET)"
  it('a worker that drops the request before answering is said to have dropped it, not to refuse connections', async () => {
    const a = await upstream();
    a.setDefault(resetBeforeAnswer());
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    const err = (r.json() as { error: { code: string; message: string } }).error;
    expect(err.code).toBe('upstream_connect_failed');
    expect(err.message).toMatch(/^worker v1-w0 dropped the request: it closed the connection before answering \(ECONNRESET\); ejected for \d+ ms$/);
    expect(err.message).not.toMatch(/could not connect/);
  });

  it('a worker that drops a non-streaming answer mid-body is said to fail mid-response, not before answering', async () => {
    const a = await upstream();
    a.setDefault(async (c) => {
      c.res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      await c.write('{"id":"x",');
      c.res.socket?.destroy();
    });
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    const err = (r.json() as { error: { code: string; message: string } }).error;
    expect(err.code).toBe('upstream_closed');
    expect(err.message).toMatch(/^worker v1-w0 failed mid-response: ECONNRESET: worker closed the connection mid-response/);
  });

  it('never retries a 4xx and never ejects for it', async () => {
    const a = await upstream();
    const b = await upstream();
    const body = { object: 'error', message: 'max_tokens is too large', type: 'BadRequestError', code: 400 };
    a.setDefault(json(body, 400));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url, b.url] }], route: { weights: { v1: 1 } } }], {}, rr());
    const recs = records(gw);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(400);
    expect(r.json()).toEqual(body);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w0');
    expect(b.requests).toHaveLength(0);
    expect(gw.dp.pool('m', 'v1').workers[0]!.ejectedUntil).toBe(0);
    expect(recs[0]).toMatchObject({ status: 400, retries: 0 });
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
  });

  it('answers 502 with a code when every worker refuses', async () => {
    const p1 = await closedPort();
    const p2 = await closedPort();
    const gw = await gateway([
      { name: 'm', versions: [{ id: 'v1', workers: [`http://127.0.0.1:${p1}`, `http://127.0.0.1:${p2}`] }], route: { weights: { v1: 1 } } },
    ]);
    const recs = records(gw);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_connect_failed', type: 'upstream_error' } });
    expect(recs[0]).toMatchObject({ status: 502, errorCode: 'upstream_connect_failed', retries: 1 });
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(1);
    // both ejected now: the next request has no healthy worker at all
    const next = await post(gw.url, chatReq());
    expect(next.status).toBe(503);
    expect(next.json()).toMatchObject({ error: { code: 'no_healthy_workers' } });
    expect(next.headers['retry-after']).toBe('1');
  });

  it('never retries on another version: the pool is the version the split chose', async () => {
    const bad = await upstream();
    const other = await upstream();
    bad.setDefault(status(503));
    const gw = await gateway([
      {
        name: 'm',
        versions: [
          { id: 'v1', workers: [bad.url] },
          { id: 'v2', workers: [other.url] },
        ],
        route: { weights: { v1: 1, v2: 0 } },
      },
    ]);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    expect(r.headers['x-glidepath-version']).toBe('v1');
    expect(other.requests).toHaveLength(0);
  });

  it('answers 502 with a code when every worker answers 5xx', async () => {
    const a = await upstream();
    const b = await upstream();
    a.setDefault(status(500));
    b.setDefault(status(503));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url, b.url] }], route: { weights: { v1: 1 } } }], {}, rr());
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_error', type: 'upstream_error' } });
    expect(a.requests.length + b.requests.length).toBe(2);
  });

  it('a refused connection does not spend a retry: a worker that is listening is still reached (each tried once)', async () => {
    // workers killed and not yet noticed, replacements not yet listening: the request never reached them
    const closed = [await closedPort(), await closedPort(), await closedPort()].map((p) => `http://127.0.0.1:${p}`);
    const good = await upstream();
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [...closed, good.url] }], route: { weights: { v1: 1 } } }], { maxRetries: 1 }, rr());
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(good.requests).toHaveLength(1);
  });

  it('bounds the retries by maxRetries', async () => {
    const ups = [await upstream(), await upstream(), await upstream(), await upstream()];
    for (const u of ups) u.setDefault(status(500));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: ups.map((u) => u.url) }], route: { weights: { v1: 1 } } }], { maxRetries: 2 }, rr());
    const r = await post(gw.url, chatReq());
    expect(r.status).toBeGreaterThanOrEqual(500);
    expect(ups.reduce((s, u) => s + u.requests.length, 0)).toBe(3);
  });
});

describe('timeouts', () => {
  it('retries a hanging worker after the first-token timeout, then answers 504', async () => {
    const a = await upstream();
    const b = await upstream();
    a.setDefault(hang());
    b.setDefault(hangAfterHeaders());
    const gw = await gateway(
      [{ name: 'm', versions: [{ id: 'v1', workers: [a.url, b.url] }], route: { weights: { v1: 1 } } }],
      { firstTokenTimeoutMs: 150 },
      rr(),
    );
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(504);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_timeout', type: 'timeout_error' } });
    expect(recs[0]).toMatchObject({ status: 504, errorCode: 'upstream_timeout', retries: 1 });
    // both upstream requests were cancelled
    await a.requests[0]!.closed;
    await b.requests[0]!.closed;
    expect(a.requests[0]!.aborted && b.requests[0]!.aborted).toBe(true);
    expect(gw.dp.pool('m', 'v1').workers.map((w) => w.outstanding)).toEqual([0, 0]);
  });

  it('retries a hanging worker and succeeds on the next', async () => {
    const a = await upstream();
    const b = await upstream();
    a.setDefault(hang());
    const gw = await gateway(
      [{ name: 'm', versions: [{ id: 'v1', workers: [a.url, b.url] }], route: { weights: { v1: 1 } } }],
      { firstTokenTimeoutMs: 150, requestTimeoutMs: 150 },
      rr(),
    );
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-worker']).toBe('v1-w1');
  });

  it('ends a stream that goes silent mid-way with an SSE error event (idle timeout)', async () => {
    const a = await upstream();
    const events = sseEvents(5);
    a.setDefault(async (c) => {
      c.res.writeHead(200, { 'content-type': 'text/event-stream' });
      await c.write(events[0]!);
      await c.write(events[1]!);
      // then silence
    });
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }], { idleTimeoutMs: 150 });
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.body.startsWith(events[0]! + events[1]!)).toBe(true);
    const data = sseData(r.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data.at(-2)!)).toMatchObject({ error: { code: 'upstream_idle_timeout' } });
    expect(recs[0]).toMatchObject({ status: 200, errorCode: 'upstream_idle_timeout' });
    await a.requests[0]!.closed;
    expect(a.requests[0]!.aborted).toBe(true);
  });
});

describe('broken and garbage upstream answers', () => {
  it('a stream that breaks after it started, with no other worker to continue it, ends with an SSE error event, [DONE] and a clean end; recorded as an error', async () => {
    const a = await upstream();
    const b = await upstream();
    const events = sseEvents(10);
    a.setDefault(destroyAfter(events, 3));
    // b is another version's: a stream never continues on another version
    const gw = await gateway(twoVersions(a.url, b.url), {}, rr());
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.body.startsWith(events.slice(0, 3).join(''))).toBe(true);
    const data = sseData(r.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data.at(-2)!)).toMatchObject({ error: { code: 'upstream_stream_broken', type: 'upstream_error' } });
    expect(data.at(-2)).toContain('(not resumed: no other worker of the version could take it)');
    // nothing after the error event but [DONE]
    expect(r.body.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(b.requests).toHaveLength(0);
    expect(recs[0]).toMatchObject({ status: 200, errorCode: 'upstream_stream_broken' });
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(1);
  });

  it('invalid JSON from the worker → 502 upstream_invalid_json', async () => {
    const a = await upstream();
    a.setDefault(invalidJson());
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const recs = records(gw);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_invalid_json', type: 'upstream_error' } });
    expect(recs[0]).toMatchObject({ status: 502, errorCode: 'upstream_invalid_json' });
  });

  it('a stream that ends after its finish_reason but without [DONE] is ended by the gateway: the client had everything', async () => {
    const a = await upstream();
    const events = sseEvents(4);
    a.setDefault(truncated(events));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.body).toBe(events.join(''));
    expect(recs[0]).toMatchObject({ status: 200, errorCode: undefined });
  });

  it('a stream that ends without [DONE] before its finish_reason → SSE error event upstream_truncated', async () => {
    const a = await upstream();
    const events = sseEvents(4).slice(0, 3);
    a.setDefault(truncated(events));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    const data = sseData(r.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data.at(-2)!)).toMatchObject({ error: { code: 'upstream_truncated' } });
    expect(recs[0]).toMatchObject({ errorCode: 'upstream_truncated' });
  });

  it('a malformed SSE event stops forwarding and ends with an SSE error event', async () => {
    const a = await upstream();
    const events = sseEvents(4);
    a.setDefault(stream([events[0]!, events[1]!, 'data: not json at all\n\n', events[2]!, 'data: [DONE]\n\n']));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const recs = records(gw);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.body).not.toContain('data: not json at all');
    const data = sseData(r.body);
    expect(data.at(-1)).toBe('[DONE]');
    expect(JSON.parse(data.at(-2)!)).toMatchObject({ error: { code: 'upstream_malformed_stream' } });
    expect(recs[0]).toMatchObject({ errorCode: 'upstream_malformed_stream' });
    await a.requests[0]!.closed;
  });

  it('a content-type with a control character (it would split the client head) → 502, and the gateway keeps serving', async () => {
    const a = await upstream();
    a.setDefault((c) => {
      c.req.socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\x01\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
    });
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(502);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_closed' } });
    expect((r.json() as { error: { message: string } }).error.message).toMatch(/control character in content-type/);
    a.setDefault(stream(sseEvents(2)));
    const ok = await post(gw.url, chatReq({ stream: true }));
    expect(ok.status).toBe(200);
    expect(ok.body).toBe(sseEvents(2).join(''));
  });

  it('a 200 answer with an HTML body for a non-streaming request → 502', async () => {
    const a = await upstream();
    a.setDefault(raw(200, '<html>oops</html>', 'text/html'));
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }]);
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(502);
    expect(r.json()).toMatchObject({ error: { code: 'upstream_invalid_json' } });
    expect(r.body).not.toMatch(/\n\s+at /); // no stack trace
  });
});

describe('non-streaming request timeout', () => {
  it('lets a non-streaming answer take longer than the first-token limit (its first byte comes at the end)', async () => {
    const a = await upstream();
    a.setDefault(async (c) => {
      await new Promise((r) => setTimeout(r, 300));
      c.res.writeHead(200, { 'content-type': 'application/json' });
      c.res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'late' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
    const gw = await gateway([{ name: 'm', versions: [{ id: 'v1', workers: [a.url] }], route: { weights: { v1: 1 } } }], {
      firstTokenTimeoutMs: 100,
      requestTimeoutMs: 5_000,
    });
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
  });
});
