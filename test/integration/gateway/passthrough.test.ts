// Streaming and non-streaming passthrough, response headers, disconnects and routing across versions.
import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { chatBody, deferred, json, sseEvents, stream, streamTokens } from '../../helpers/upstream.js';
import { chatReq, httpCall, oneModel, openStream, post, gatewayFixtures, twoVersions } from '../../helpers/gateway.js';

const { upstream, gateway } = gatewayFixtures();

describe('streaming passthrough', () => {
  it('forwards the SSE bytes exactly as the worker sent them, with version and worker headers', async () => {
    const up = await upstream();
    const events = sseEvents(20, { usage: { prompt_tokens: 5, completion_tokens: 20 } });
    // unicode and escapes must survive byte for byte
    events.splice(
      3,
      0,
      `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'héllo ✓ "q" \\n 🚀' }, finish_reason: null }] })}\n\n`,
    );
    up.script(stream(events));
    const gw = await gateway(oneModel([up.url]));
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    expect(r.headers['x-glidepath-version']).toBe('v1');
    expect(r.headers['x-glidepath-worker']).toBe('v1-w0');
    expect(r.raw.equals(Buffer.from(events.join(''), 'utf8'))).toBe(true);
    // the worker got the client's body unchanged
    expect(up.requests[0]!.body).toBe(JSON.stringify(chatReq({ stream: true })));
    expect(up.requests[0]!.url).toBe('/v1/chat/completions');
    const st = gw.telemetry.stats('m', 'v1');
    expect(st.requests).toBe(1);
    expect(st.errors).toBe(0);
    expect(Number.isFinite(st.ttftMs.p50)).toBe(true);
  });

  it('forwards events split at arbitrary byte boundaries (multi-byte characters cut in half)', async () => {
    const up = await upstream();
    const whole = sseEvents(5, { id: 'é✓' }).join('');
    const bytes = Buffer.from(whole, 'utf8');
    // cut into 7-byte pieces: events and UTF-8 sequences both straddle chunks
    const pieces: string[] = [];
    for (let i = 0; i < bytes.length; i += 7) pieces.push(bytes.subarray(i, i + 7).toString('latin1'));
    up.script(async (c) => {
      c.res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const p of pieces) await new Promise<void>((r) => c.res.write(Buffer.from(p, 'latin1'), () => r()));
      c.res.end();
    });
    const gw = await gateway(oneModel([up.url]));
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.status).toBe(200);
    expect(r.raw.equals(bytes)).toBe(true);
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
  });

  it('passes a CRLF-framed stream through without declaring it truncated (regression)', async () => {
    const up = await upstream();
    const events = sseEvents(4).map((e) => e.replace(/\n/g, '\r\n'));
    up.script(stream(events));
    const gw = await gateway(oneModel([up.url]));
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.body).toBe(events.join(''));
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
  });

  it('keeps a path prefix of the worker URL and serves /v1/completions', async () => {
    const up = await upstream();
    const events = sseEvents(3, { completions: true });
    up.script(stream(events));
    const gw = await gateway(oneModel([`${up.url}/prefix/`]));
    const r = await httpCall(gw.url, '/v1/completions', { model: 'm', prompt: 'hi', stream: true });
    expect(r.status).toBe(200);
    expect(r.body).toBe(events.join(''));
    expect(up.requests[0]!.url).toBe('/prefix/v1/completions');
  });

  it('counts tokens and measures inter-token gaps from the events', async () => {
    const up = await upstream();
    up.script(streamTokens(10, { usage: { prompt_tokens: 4, completion_tokens: 10 } }));
    const gw = await gateway(oneModel([up.url]));
    const records: { completionTokens: number; promptTokens: number; itl: number; status: number }[] = [];
    gw.telemetry.subscribe((r) => records.push({ completionTokens: r.completionTokens, promptTokens: r.promptTokens, itl: r.itlMs.length, status: r.status }));
    await post(gw.url, chatReq({ stream: true }));
    expect(records).toEqual([{ completionTokens: 10, promptTokens: 4, itl: 9, status: 200 }]);
  });
});

describe('backpressure', () => {
  it('a slow reader gets every byte of a large stream, and the gateway does not pile up drain listeners', async () => {
    const up = await upstream();
    const big = 'x'.repeat(2000);
    const events = Array.from({ length: 1500 }, (_, i) => `data: {"choices":[{"index":0,"delta":{"content":"${i}${big}"}}]}\n\n`);
    events.push('data: [DONE]\n\n');
    up.script(stream(events));
    const gw = await gateway(oneModel([up.url]));
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const got = await new Promise<Buffer>((resolve, reject) => {
        const req = httpRequest(gw.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          let n = 0;
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            // stop reading now and then so the gateway's socket buffer fills up
            if (++n % 20 === 0) {
              res.pause();
              setImmediate(() => setImmediate(() => res.resume()));
            }
          });
          res.on('end', () => resolve(Buffer.concat(chunks)));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(JSON.stringify(chatReq({ stream: true })));
      });
      expect(got.equals(Buffer.from(events.join('')))).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).not.toContain('MaxListenersExceededWarning');
    expect(gw.dp.pool('m', 'v1').workers[0]!.outstanding).toBe(0);
  });
});

describe('slow clients', () => {
  it('a client that stops reading for longer than the idle timeout is not mistaken for a silent worker (regression)', async () => {
    const up = await upstream();
    const big = 'y'.repeat(4000);
    const events = Array.from({ length: 2500 }, (_, i) => `data: {"choices":[{"index":0,"delta":{"content":"${i}${big}"}}]}\n\n`);
    events.push('data: [DONE]\n\n');
    // written all at once: the worker is never silent, only held back by the gateway
    up.script((c) => {
      c.res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of events) c.res.write(e);
      c.res.end();
    });
    const gw = await gateway(oneModel([up.url]), { idleTimeoutMs: 400 });
    const got = await new Promise<Buffer>((resolve, reject) => {
      const req = httpRequest(gw.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        let paused = false;
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          if (!paused) {
            paused = true;
            res.pause();
            // the scenario, not synchronisation: the client reads nothing for 3× the idle timeout
            // while ~10 MB fill the socket buffers and the gateway has to pause the worker
            setTimeout(() => res.resume(), 1200);
          }
        });
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(JSON.stringify(chatReq({ stream: true })));
    });
    expect(got.toString()).not.toContain('upstream_idle_timeout');
    expect(got.equals(Buffer.from(events.join('')))).toBe(true);
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
  });
});

describe('non-streaming', () => {
  it('returns the worker body with headers and records usage', async () => {
    const up = await upstream();
    const body = chatBody('hello', { prompt_tokens: 11, completion_tokens: 3 });
    up.script(json(body));
    const gw = await gateway(oneModel([up.url]));
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.json()).toEqual(body);
    expect(r.headers['x-glidepath-version']).toBe('v1');
    expect(r.headers['x-glidepath-worker']).toBe('v1-w0');
    expect(r.headers['content-length']).toBe(String(Buffer.byteLength(JSON.stringify(body))));
    const text = await gw.telemetry.metrics.registry.metrics();
    expect(text).toContain('glidepath_tokens_total{model="m",version="v1",kind="prompt"} 11');
    expect(text).toContain('glidepath_tokens_total{model="m",version="v1",kind="completion"} 3');
    expect(text).toContain('glidepath_requests_total{model="m",version="v1",code="200"} 1');
  });

  it('does not forward hop-by-hop or client headers to the worker', async () => {
    const up = await upstream();
    const gw = await gateway(oneModel([up.url]));
    await post(gw.url, chatReq(), { headers: { connection: 'keep-alive', 'keep-alive': 'timeout=5', te: 'trailers', 'x-session-id': 's1' } });
    const h = up.requests[0]!.headers;
    expect(h['keep-alive']).toBeUndefined();
    expect(h.te).toBeUndefined();
    expect(h['content-type']).toBe('application/json');
  });
});

describe('client disconnect', () => {
  it('cancels the upstream request when the client goes away mid-stream', async () => {
    const up = await upstream();
    const gate = deferred();
    up.script(streamTokens(50, { gate: { before: 2, until: gate.promise } }));
    const gw = await gateway(oneModel([up.url]));
    const records: number[] = [];
    gw.telemetry.subscribe((r) => records.push(r.status));
    const s = openStream(gw.url, chatReq({ stream: true }));
    await s.firstChunk;
    const upReq = await up.request(1);
    s.abort();
    await upReq.closed;
    expect(upReq.aborted).toBe(true);
    gate.resolve();
    await gw.dp.pool('m', 'v1').idle();
    expect(records).toEqual([499]);
    // a client hang-up is not the version's fault
    expect(gw.telemetry.stats('m', 'v1').errors).toBe(0);
    expect(gw.dp.pool('m', 'v1').workers[0]!.outstanding).toBe(0);
  });

  it('cancels the upstream request when the client goes away before the first byte', async () => {
    const up = await upstream();
    up.setDefault(() => undefined); // hang
    const gw = await gateway(oneModel([up.url]));
    const s = openStream(gw.url, chatReq({ stream: true }));
    const upReq = await up.request(1);
    s.abort();
    await upReq.closed;
    expect(upReq.aborted).toBe(true);
    await gw.dp.pool('m', 'v1').idle();
    expect(up.requests).toHaveLength(1); // not retried
  });
});

describe('versions and headers', () => {
  it('sends 95/5 weighted traffic to each version exactly and labels responses with the version that served them', async () => {
    const a = await upstream();
    const b = await upstream();
    a.setDefault(json(chatBody('from a')));
    b.setDefault(json(chatBody('from b')));
    const gw = await gateway([
      {
        name: 'm',
        versions: [
          { id: 'v1', workers: [a.url] },
          { id: 'v2', workers: [b.url] },
        ],
        route: { weights: { v1: 95, v2: 5 } },
      },
    ]);
    const seen: Record<string, number> = {};
    for (let i = 0; i < 100; i++) {
      const r = await post(gw.url, chatReq());
      const v = r.headers['x-glidepath-version'] as string;
      seen[v] = (seen[v] ?? 0) + 1;
      const content = (r.json().choices as { message: { content: string } }[])[0]!.message.content;
      expect(content).toBe(v === 'v1' ? 'from a' : 'from b');
    }
    expect(seen).toEqual({ v1: 95, v2: 5 });
    const shares = gw.dp.model('m').split.shares();
    expect(shares.find((s) => s.version === 'v2')).toMatchObject({ configured: 0.05, actual: 0.05, count: 5 });
  });

  it('honours the explicit version header and refuses a version not in the route', async () => {
    const a = await upstream();
    const b = await upstream();
    const gw = await gateway([
      {
        name: 'm',
        versions: [
          { id: 'v1', workers: [a.url] },
          { id: 'v2', workers: [b.url] },
          { id: 'v3', workers: [b.url] },
        ],
        route: { weights: { v1: 1, v2: 0 } },
      },
    ]);
    const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v2' } });
    expect(r.status).toBe(200);
    expect(r.headers['x-glidepath-version']).toBe('v2');
    expect(b.requests).toHaveLength(1);
    const bad = await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v3' } });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'unknown_version', type: 'invalid_request_error' } });
    expect((bad.json().error as { message: string }).message).toContain('x-glidepath-version');
  });

  it('a category naming an Object.prototype key is no override (regression: it chose a function as the version)', async () => {
    const a = await upstream();
    const gw = await gateway(oneModel([a.url]));
    for (const cat of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-category': cat } });
      expect(r.status, cat).toBe(200);
      expect(r.headers['x-glidepath-version']).toBe('v1');
    }
  });

  it('ignores the version header when it is disabled', async () => {
    const a = await upstream();
    const b = await upstream();
    const gw = await gateway(twoVersions(a.url, b.url), { allowVersionHeader: false });
    const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-version': 'v2' } });
    expect(r.headers['x-glidepath-version']).toBe('v1');
  });

  it('routes a category override and keeps a sticky session on one version', async () => {
    const a = await upstream();
    const b = await upstream();
    const gw = await gateway([
      {
        name: 'm',
        versions: [
          { id: 'v1', workers: [a.url] },
          { id: 'v2', workers: [b.url] },
        ],
        route: { weights: { v1: 0.5, v2: 0.5 }, overrides: { beta: 'v2' } },
      },
    ]);
    for (let i = 0; i < 4; i++) {
      const r = await post(gw.url, chatReq(), { headers: { 'x-glidepath-category': 'beta' } });
      expect(r.headers['x-glidepath-version']).toBe('v2');
    }
    const first = (await post(gw.url, chatReq(), { headers: { 'x-session-id': 'user-42' } })).headers['x-glidepath-version'];
    for (let i = 0; i < 6; i++) {
      expect((await post(gw.url, chatReq(), { headers: { 'x-session-id': 'user-42' } })).headers['x-glidepath-version']).toBe(first);
      // the body's user is the fallback sticky key
      expect((await post(gw.url, chatReq({ user: 'user-42' }))).headers['x-glidepath-version']).toBe(first);
    }
  });
});

describe('answers larger than one socket read', () => {
  // the upstream pool reads plain TCP into one shared 64 KiB buffer: whatever keeps bytes past a read
  // must have copied them, or a later read overwrites them
  const bigText = Array.from({ length: 30_000 }, (_, i) => `w${i}`).join(' ');

  it('a ~200 KiB JSON answer reaches the client byte for byte', async () => {
    const up = await upstream();
    const body = chatBody(bigText);
    up.script(json(body));
    const gw = await gateway(oneModel([up.url]));
    const r = await post(gw.url, chatReq());
    expect(r.status).toBe(200);
    expect(r.raw.length).toBeGreaterThan(3 * 64 * 1024);
    expect(r.raw.equals(Buffer.from(JSON.stringify(body)))).toBe(true);
  });

  it('a stream whose events are larger than a read reaches the client byte for byte and is measured', async () => {
    const up = await upstream();
    const events = sseEvents(6, { usage: { prompt_tokens: 3, completion_tokens: 6 } }).map((e) => e.replace('"content":"', `"content":"${bigText}`));
    up.script(stream(events));
    const gw = await gateway(oneModel([up.url]));
    const records: number[] = [];
    gw.telemetry.subscribe((rec) => records.push(rec.completionTokens));
    const r = await post(gw.url, chatReq({ stream: true }));
    expect(r.raw.equals(Buffer.from(events.join('')))).toBe(true);
    expect(records).toEqual([6]);
  });
});
