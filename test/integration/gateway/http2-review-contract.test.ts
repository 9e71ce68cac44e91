// HTTP/2 on the data plane, continued from http2-review.test.ts: FrontResponse's contract as over
// HTTP/1.1, and the gateway's own answers over HTTP/2 against hostile and broken input.
import { constants } from 'node:http2';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimFaultSpec } from '../../../src/config/sim-faults.js';
import { httpCall, oneModel, startGateway, until } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';
import { h2Call, h2Kit, h2Outcome, h2Request } from '../../helpers/h2.js';
import { DATA, HEADERS, RST, Raw as H2Raw, get } from '../../helpers/h2-raw.js';

const { cleanup, start, session } = h2Kit();

const request = h2Request;
const call = h2Call;
const outcome = h2Outcome;

const Raw = { open: (port: number, settings?: [number, number][]) => H2Raw.open(cleanup, port, settings) };

describe('FrontResponse over HTTP/2 keeps HTTP/1.1’s contract', () => {
  it('onClose given after the client reset the stream is still called', async () => {
    // Defect (fixed): H2Res only remembered the callback; one registered after 'close' was never
    // called (HTTP/1.1's Res calls it on the next tick), so a handler that registers it after an await
    // kept its work going for a client long gone.
    let closes = 0;
    const seen: [boolean, boolean][] = [];
    const { url } = await start((req, res) => {
      seen.push([res.destroyed, res.headersSent]);
      res.writeHead(200, { 'content-type': 'text/plain' });
      seen.push([res.destroyed, res.headersSent]);
      setTimeout(() => {
        seen.push([res.destroyed, res.headersSent]);
        res.onClose(() => closes++);
        res.onClose(() => closes++); // both, as over HTTP/1.1
      }, 100);
    });
    const s = await session(url);
    const st = request(s, { ':path': '/late' });
    await new Promise((r) => setTimeout(r, 20));
    st.close(constants.NGHTTP2_CANCEL);
    await until(() => closes === 2, 'both callbacks', 3000);
    expect(seen).toEqual([
      [false, false],
      [false, true],
      [true, true],
    ]);
  });

  it('destroy(), or a handler that throws once its head is out, resets the stream: the client never sees a clean end', async () => {
    // Defect (fixed): close(INTERNAL_ERROR) on a stream with nothing left to write ends its writable side
    // first (Node's closeStream calls end()), and nghttp2 flushes that END_STREAM before the
    // RST_STREAM: the client took a truncated answer for a complete one.
    const { url } = await start((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 100 });
      res.write('partial');
      if (req.url === '/destroy') setImmediate(() => res.destroy());
      else if (req.url === '/twice') res.writeHead(200, {}); // throws: the head is out
    });
    const s = await session(url);
    for (const p of ['/destroy', '/twice']) {
      const o = await outcome(request(s, { ':path': p }));
      expect(o.ended, p).toBe(false);
      expect(o.rstCode, p).toBe(constants.NGHTTP2_INTERNAL_ERROR);
    }
  });

  it('write() copies what it is given, HEAD gets no body, and write after end is ignored (regression)', async () => {
    const { url } = await start((req, res) => {
      const buf = Buffer.from('original');
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(buf);
      buf.write('CHANGED!'); // the caller reuses its memory once write returns
      res.end(buf.subarray(0, 3));
      buf.fill(0);
      expect(res.write('more')).toBe(true); // ignored, nothing to wait for (as over HTTP/1.1)
      res.end('again');
    });
    const s = await session(url);
    const got = await call(s, { ':path': '/' });
    expect(got.body).toBe('originalCHA');
    const head = await outcome(request(s, { ':method': 'HEAD', ':path': '/' }));
    expect(head).toEqual({ ended: true, rstCode: 0, body: '' });
  });

  it('connection-specific response fields HTTP/2 forbids are dropped, not a 500', async () => {
    // Defect (fixed): `te` and `http2-settings` were passed to respond(), which throws: a handler that
    // sets them got a 500 (or, from a callback, an uncaught exception).
    const { url } = await start((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain', te: 'gzip', 'http2-settings': 'AAA', Connection: 'close', 'Keep-Alive': 'timeout=5' });
      res.end('fine');
    });
    const s = await session(url);
    const got = await call(s, { ':path': '/' });
    expect(got.status).toBe(200);
    expect(got.body).toBe('fine');
    expect(got.headers.te).toBeUndefined();
  });
});

// ---- crash safety and the gateway over HTTP/2 ---------------------------------------------------

describe('the gateway over HTTP/2 against hostile and broken input', () => {
  const sims: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const x of sims.splice(0)) await x.close();
  });

  async function gatewayWith(faults: SimFaultSpec[] = [{}], interTokenMs = 0): Promise<Gateway> {
    const urls: string[] = [];
    for (const f of faults) {
      const sim = await startSim({ model: 'm', version: 'v1', seed: 11, interTokenMs, jitter: 0, faults: f });
      sims.push(sim);
      urls.push(sim.url);
    }
    const gw = await startGateway(oneModel(urls), {}, { picker: new RoundRobinPicker() });
    cleanup.push(() => gw.close());
    return gw;
  }

  it('odd pseudo-headers, methods, paths and trailers get an answer or a reset, and the process keeps serving (regression)', async () => {
    const gw = await gatewayWith();
    const r = await Raw.open(Number(gw.url.split(':')[2]));
    const body = JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 3, stream: true });
    const json = ['content-type', 'application/json'] as const;
    const cases: Buffer[][] = [
      [
        HEADERS(
          1,
          [
            [':method', 'CONNECT'],
            [':authority', 'x:1'],
          ],
          false,
        ),
        RST(1),
      ],
      [
        HEADERS(3, [
          [':method', 'GET'],
          [':scheme', 'foo'],
          [':path', 'relative'],
          [':authority', 'x'],
        ]),
      ],
      [HEADERS(5, get('*', 'OPTIONS'))],
      [HEADERS(7, get('http://x/health'))],
      [
        HEADERS(9, [
          [':method', 'GET'],
          [':scheme', 'http'],
          [':authority', 'x'],
        ]),
      ], // no :path
      [HEADERS(11, get('/' + 'a'.repeat(15_000)))],
      [HEADERS(13, get('/health', 'HEAD'))],
      [HEADERS(15, get('/v1/completions', 'HEAD'))],
      [HEADERS(17, [...get('/v1/completions', 'POST'), json], false), DATA(17, body), HEADERS(17, [['x-trailer', '1']])],
      [HEADERS(19, [...get('/v1/completions', 'POST'), json], false), DATA(19, body, true), RST(19)],
      [HEADERS(21, [...get('/health'), ['te', 'gzip']])],
      [HEADERS(23, [...get('/health'), ['X-Upper', 'y']])],
      [HEADERS(25, [...get('/v1/completions', 'POST'), ['content-length', '5']], false), DATA(25, 'abc', true)],
      [HEADERS(27, get('/he alth'))],
      [HEADERS(29, get('/health', ''))],
      [HEADERS(31, [...get('/health'), ['cookie', 'a=1'], ['cookie', 'b=2'], ['host', 'other']])],
      [HEADERS(33, [...get('/v1/completions', 'POST'), json, ['content-length', '-1']], false), DATA(33, '{}', true)],
    ];
    for (const c of cases) r.send(...c);
    const ids = [3, 5, 7, 9, 11, 13, 15, 17, 21, 23, 25, 27, 29, 31, 33];
    await until(() => ids.every((id) => r.answered(id) || r.reset(id) !== undefined), 'an answer or a reset for each');
    expect(r.closed).toBe(false);
    // the same connection and a new one still work
    r.send(HEADERS(35, get('/health')));
    await until(() => r.answered(35), 'the health answer');
    const s = await session(gw.url);
    expect((await call(s, { ':path': '/health' })).status).toBe(200);
  });

  it('a worker that breaks mid-stream: the HTTP/2 client gets the same resumed stream as an HTTP/1.1 one', async () => {
    const gw = await gatewayWith([{ crashAfterTokens: 5 }, {}, { crashAfterTokens: 5 }, {}]);
    const body = JSON.stringify({ model: 'm', prompt: 'Once upon a time', stream: true, temperature: 0, max_tokens: 30 });
    const norm = (t: string): string => t.replace(/"id":"[^"]+"/g, '"id":"ID"').replace(/"created":\d+/g, '"created":0');
    const h1 = await httpCall(gw.url, '/v1/completions', undefined, { rawBody: body });
    expect(h1.status).toBe(200);
    const s = await session(gw.url);
    const h2 = await call(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, body);
    expect(h2.status).toBe(200);
    expect(norm(h2.body)).toBe(norm(h1.body));
    expect(h2.body).toContain('[DONE]');
    const metrics = await gw.telemetry.metrics.registry.metrics();
    // both streams were broken and resumed (a continuation may land on the other crashing worker too)
    const resumed = /glidepath_stream_migrations_total\{[^}]*outcome="resumed"[^}]*\} (\d+)/.exec(metrics);
    expect(Number(resumed?.[1])).toBeGreaterThanOrEqual(2);
  });

  it('a client that resets its stream mid-answer frees the worker at once; errors are answered as over HTTP/1.1', async () => {
    const gw = await gatewayWith([{}], 20);
    const pool = gw.dp.models.get('m')!.pools.get('v1')!;
    const s = await session(gw.url);
    const long = JSON.stringify({ model: 'm', prompt: 'Once upon a time', stream: true, max_tokens: 200 });
    const st = request(s, { ':method': 'POST', ':path': '/v1/completions', 'content-type': 'application/json' }, false);
    st.end(long);
    await once(st, 'data');
    expect(pool.inflight.size).toBe(1);
    st.close(constants.NGHTTP2_CANCEL);
    await until(() => pool.inflight.size === 0, 'the worker released');
    for (const [path, method, payload] of [
      ['/v1/completions', 'POST', '{"model":'],
      ['/v1/completions', 'GET', undefined],
      ['/nope', 'GET', undefined],
      ['/v1/completions', 'POST', JSON.stringify({ model: 'other', prompt: 'x' })],
    ] as const) {
      const h1 = await httpCall(gw.url, path, undefined, { method, ...(payload === undefined ? {} : { rawBody: payload }) });
      const h2 = await call(s, { ':method': method, ':path': path, 'content-type': 'application/json' }, payload);
      expect(h2.status, `${method} ${path}`).toBe(h1.status);
      expect(JSON.parse(h2.body), `${method} ${path}`).toEqual(JSON.parse(h1.body));
    }
  });
});
