// The gateway's HTTP/1.1 client to workers, against raw TCP servers that send exact bytes.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConnectError, LocalResourceError, ProtocolError, UpstreamPool, WorkerQueueError } from '../../../src/gateway/upstream.js';
import { call, json, rawServer } from '../../helpers/raw-worker.js';
import type { RawServer, Result } from '../../helpers/raw-worker.js';

const OPTS = { connections: 4, connectTimeoutMs: 1000, keepAliveTimeoutMs: 4000, queueMax: 256, queueTimeoutMs: 30_000 };
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(answer: Parameters<typeof rawServer>[0], opts = OPTS, suffix = ''): Promise<{ srv: RawServer; pool: UpstreamPool }> {
  const srv = await rawServer(answer);
  const pool = new UpstreamPool(`http://127.0.0.1:${srv.port}${suffix}`, opts);
  cleanups.push(
    () => srv.close(),
    () => pool.destroy(),
  );
  return { srv, pool };
}

describe('UpstreamPool', () => {
  it('sends one well-formed POST and reads a Content-Length answer; the connection is reused', async () => {
    const { srv, pool } = await setup(() => [json('{"ok":1}')]);
    const a = await call(pool, '/v1/chat/completions', true, '{"x":"y"}').done;
    expect(a).toMatchObject({ status: 200, contentType: 'application/json', events: ['start', 'sent', 'head', 'end'], queuedMs: 0 });
    expect(a.parts.join('')).toBe('{"ok":1}');
    expect(srv.requests[0]).toBe(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${srv.port}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: 9\r\n\r\n{"x":"y"}`,
    );
    const b = await call(pool).done;
    expect(b.parts.join('')).toBe('{"ok":1}');
    expect(srv.requests[1]).toContain('accept: application/json\r\n');
    expect(srv.connections).toBe(1);
  });

  it('a connection paused by a slow client and never resumed still carries the next request', async () => {
    const { srv, pool } = await setup(() => [json('{"ok":1}')]);
    const paused = await new Promise<Result>((resolve) => {
      const r: Result = { status: 0, contentType: undefined, parts: [], error: undefined, events: [], queuedMs: -1 };
      pool.dispatch('/v1/completions', false, Buffer.from('{}'), {
        onRequestStart: () => undefined,
        onRequestSent: () => undefined,
        // the client is slow: pause; the whole answer is in this read, so it ends before anyone resumes
        onResponseStart: (c, status) => {
          r.status = status;
          c.pause();
        },
        onResponseData: (_c, chunk) => r.parts.push(chunk.toString()),
        onResponseEnd: (tail) => {
          if (tail !== undefined) r.parts.push(tail.toString());
          resolve(r);
        },
        onResponseError: (_c, err) => {
          r.error = err;
          resolve(r);
        },
      });
    });
    expect(paused.parts.join('')).toBe('{"ok":1}');
    const next = await call(pool).done;
    expect(next.parts.join('')).toBe('{"ok":1}');
    expect(srv.connections).toBe(1);
  });

  it('puts the worker URL path before every request path', async () => {
    const { srv, pool } = await setup(() => [json('{}')], OPTS, '/model-a/');
    await call(pool).done;
    expect(srv.requests[0]?.startsWith('POST /model-a/v1/completions HTTP/1.1\r\n')).toBe(true);
  });

  it('decodes chunked answers: extensions, trailers and framing split anywhere across reads', async () => {
    const wire = '5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\ntrailer: x\r\n\r\n';
    // every piece its own write (several writes may still arrive in one read)
    const { pool } = await setup(() => ['HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n', ...wire.split('')]);
    const r = await call(pool, '/v1/completions', true).done;
    expect(r.error).toBeUndefined();
    expect(r.parts.join('')).toBe('hello, world');
    expect(r.contentType).toBe('text/event-stream');
  });

  it('hands the body of one read over in one call, however many chunks it holds', async () => {
    const { pool } = await setup(() => ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n3\r\nghi\r\n0\r\n\r\n']);
    const r = await call(pool).done;
    expect(r.parts).toEqual(['abcdefghi']);
  });

  it('reads a close-delimited answer to its end and does not reuse that connection', async () => {
    const { srv, pool } = await setup((_i, sock) => {
      sock.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end');
      return undefined;
    });
    const r = await call(pool).done;
    expect(r.parts.join('')).toBe('until the end');
    expect(r.events).toEqual(['start', 'sent', 'head', 'end']);
    await call(pool).done;
    expect(srv.connections).toBe(2);
  });

  it('reads the header names it acts on in any case, and no look-alikes', async () => {
    const { pool } = await setup((i) => [
      i === 0
        ? 'HTTP/1.1 200 OK\r\nCONTENT-TYPE: text/event-stream\r\nTransfer-Encoding: chunked\r\nKeep-Alive: timeout=30\r\n\r\n3\r\nabc\r\n0\r\n\r\n'
        : 'HTTP/1.1 200 OK\r\ncontent_type: text/plain\r\ncontent-lengtx: 99\r\nContent-Length: 2\r\nConnection: CLOSE\r\n\r\nhi',
    ]);
    const a = await call(pool).done;
    expect(a).toMatchObject({ status: 200, contentType: 'text/event-stream', parts: ['abc'] });
    const b = await call(pool).done;
    expect(b).toMatchObject({ status: 200, contentType: undefined, parts: ['hi'], events: ['start', 'sent', 'head', 'end'] });
    expect(pool.size).toBe(0); // connection: close
  });

  it('header values: content types passed exactly (whitespace trimmed), a control character caught after a clean value, chunked and keep-alive in any case', async () => {
    const answers = [
      'HTTP/1.1 200 OK\r\ncontent-type:  text/event-stream \r\ntransfer-encoding: CHUNKED\r\nconnection: Keep-Alive\r\n\r\n1\r\na\r\n0\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1\r\n\r\nb',
      'HTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream\r\ncontent-length: 1\r\n\r\nc',
      'HTTP/1.1 200 OK\r\ncontent-type: text/event-streamX\r\ncontent-length: 1\r\n\r\nd',
      'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\x01\r\ncontent-length: 1\r\n\r\ne',
    ];
    const { srv, pool } = await setup((i) => [answers[i] as string]);
    const got: (string | undefined)[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call(pool).done;
      expect(r.error).toBeUndefined();
      got.push(r.contentType);
    }
    expect(got).toEqual(['text/event-stream', 'text/event-stream', 'Text/Event-Stream', 'text/event-streamX']);
    // the control character is caught even right after a clean value of the same length
    expect((await call(pool).done).error?.message).toMatch(/control character in content-type/);
    expect(srv.connections).toBe(1); // all on one keep-alive connection
  });

  it('a head identical to the last one on the connection gives the same answer (remembered); a different one is read afresh', async () => {
    const head = 'HTTP/1.1 201 Created\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n';
    const { srv, pool } = await setup((i) => [i < 3 ? `${head}\r\n${i}${i}` : `${head}connection: close\r\n\r\n${i}${i}`]);
    for (let i = 0; i < 4; i++) {
      const r = await call(pool).done;
      expect(r).toMatchObject({ status: 201, contentType: 'text/plain', parts: [`${i}${i}`], events: ['start', 'sent', 'head', 'end'] });
    }
    expect(srv.connections).toBe(1);
    expect(pool.size).toBe(0); // the last head said close
  });

  it('a status line with a non-digit status code is a protocol error', async () => {
    const { pool } = await setup(() => ['HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\nhi']);
    const a = await call(pool).done;
    expect(a.error).toBeInstanceOf(ProtocolError);
    expect(a.error?.message).toMatch(/bad status line/);
  });

  it('a content-type with a control character is a protocol error (it would be sent on to the client)', async () => {
    const { pool } = await setup(() => ['HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\x01\r\ncontent-length: 2\r\n\r\nhi']);
    const a = await call(pool).done;
    expect(a.error).toBeInstanceOf(ProtocolError);
    expect(a.error?.message).toMatch(/control character in content-type/);
    expect(a.events).toEqual(['start', 'sent', 'error']);
  });

  it('closes after `connection: close` and HTTP/1.0 answers', async () => {
    const { srv, pool } = await setup((i) => [i === 0 ? json('{}', 'connection: close\r\n') : 'HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n{}']);
    await call(pool).done;
    await srv.closed[0];
    await call(pool).done;
    await srv.closed[1];
    expect(srv.connections).toBe(2);
  });

  it('skips 100 Continue and reads the real answer', async () => {
    const { pool } = await setup(() => ['HTTP/1.1 100 Continue\r\n\r\n', json('{"late":true}')]);
    const r = await call(pool).done;
    expect(r.status).toBe(200);
    expect(r.parts.join('')).toBe('{"late":true}');
  });

  it('passes 4xx and 5xx answers with their bodies', async () => {
    const { pool } = await setup(() => ['HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy']);
    const r = await call(pool).done;
    expect(r.status).toBe(503);
    expect(r.parts.join('')).toBe('busy');
  });

  it('holds requests beyond `connections` and sends them in arrival order as connections free up', async () => {
    let release!: () => void;
    let firstArrived!: () => void;
    const arrived = new Promise<void>((r) => (firstArrived = r));
    const { srv, pool } = await setup(
      (i, sock) => {
        if (i === 0) {
          release = () => sock.write(json(`{"i":${i}}`));
          firstArrived();
          return undefined;
        }
        return [json(`{"i":${i}}`)];
      },
      { ...OPTS, connections: 1 },
    );
    const a = call(pool, '/v1/completions', false, '{"n":0}');
    const b = call(pool, '/v1/completions', false, '{"n":1}');
    const c = call(pool, '/v1/completions', false, '{"n":2}');
    // sent at once when a connection is free; the others only wait
    expect([a.r.events, b.r.events, c.r.events]).toEqual([['start', 'sent'], ['start'], ['start']]);
    expect(pool.queued).toBe(2);
    await arrived;
    expect(srv.requests).toHaveLength(1);
    release();
    const results = await Promise.all([a.done, b.done, c.done]);
    expect(results.map((r) => r.parts.join(''))).toEqual(['{"i":0}', '{"i":1}', '{"i":2}']);
    expect(results.map((r) => r.events)).toEqual([
      ['start', 'sent', 'head', 'end'],
      ['start', 'sent', 'head', 'end'],
      ['start', 'sent', 'head', 'end'],
    ]);
    // how long each waited is told when it is sent
    expect(results[0].queuedMs).toBe(0);
    expect(results[1].queuedMs).toBeGreaterThan(0);
    expect(results[2].queuedMs).toBeGreaterThan(0);
    expect(pool.queued).toBe(0);
    expect(srv.requests.map((r) => r.slice(-7))).toEqual(['{"n":0}', '{"n":1}', '{"n":2}']);
    expect(srv.connections).toBe(1);
  });

  it('reports a refused connection as a ConnectError', async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const pool = new UpstreamPool(`http://127.0.0.1:${port}`, OPTS);
    cleanups.push(() => pool.destroy());
    const r = await call(pool).done;
    expect(r.error).toBeInstanceOf(ConnectError);
    expect((r.error as ConnectError).code).toBe('ECONNREFUSED');
  });

  it('sends a request again on a fresh connection when the worker closed the idle keep-alive one', async () => {
    const { srv, pool } = await setup((i, sock) => {
      if (i === 0) {
        sock.write(json('{"first":1}'));
        // the worker's idle timeout, as uvicorn does after 5 s: close without saying so
        setImmediate(() => sock.end());
        return undefined;
      }
      return [json('{"second":1}')];
    });
    await call(pool).done;
    await srv.closed[0];
    const r = await call(pool).done;
    expect(r.error).toBeUndefined();
    expect(r.parts.join('')).toBe('{"second":1}');
    expect(srv.connections).toBe(2);
  });

  it('a fresh connection that breaks before answering is an error, not a silent resend', async () => {
    const { srv, pool } = await setup((_i, sock) => {
      sock.destroy();
      return undefined;
    });
    const r = await call(pool).done;
    expect(r.error).toBeDefined();
    expect((r.error as NodeJS.ErrnoException).code).toBe('ECONNRESET');
    expect(srv.requests).toHaveLength(1);
  });

  it('abort mid-answer reports the reason synchronously and closes the connection', async () => {
    const { srv, pool } = await setup(() => ['HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n']);
    let gotData!: () => void;
    const data = new Promise<void>((r) => (gotData = r));
    const x = call(pool, '/v1/completions', true, '{}', gotData);
    await data;
    const reason = new Error('client left');
    x.ctl().abort(reason);
    const r = await x.done;
    expect(r.error).toBe(reason);
    expect(r.events.at(-1)).toBe('error');
    await srv.closed[0];
  });

  it.each([
    ['a bad status line', 'HTTP/2 200 OK\r\n\r\n'],
    ['an unknown transfer-encoding', 'HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n'],
    ['both content-length and chunked', 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n'],
    ['a bad chunk size', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n'],
    ['chunk data without CRLF', 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcX'],
    ['two different content-lengths', 'HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabc'],
  ])('reports %s as a ProtocolError and drops the connection', async (_name, answer) => {
    const { srv, pool } = await setup(() => [answer]);
    const r = await call(pool).done;
    expect(r.error).toBeInstanceOf(ProtocolError);
    await srv.closed[0];
  });

  it("closes idle connections after the worker's keep-alive hint less a second", async () => {
    const { srv, pool } = await setup(() => [json('{}', 'keep-alive: timeout=1\r\n')]);
    await call(pool).done;
    // the sweeper closes it (1 s hint − 1 s = at once); the server sees the close
    await srv.closed[0];
    expect(pool.size).toBe(0);
  });

  it('close() waits for requests in flight; destroy() fails them', async () => {
    let answer!: () => void;
    let arrivedNow!: () => void;
    const arrived = new Promise<void>((r) => (arrivedNow = r));
    const { pool } = await setup((_i, sock) => {
      answer = () => sock.write(json('{"late":1}'));
      arrivedNow();
      return undefined;
    });
    const a = call(pool);
    await arrived;
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    expect(closed).toBe(false);
    answer();
    expect((await a.done).parts.join('')).toBe('{"late":1}');
    await closing;
    expect(pool.size).toBe(0);
    const after = await call(pool).done;
    expect(after.error).toBeInstanceOf(ConnectError);

    const { pool: p2 } = await setup(() => undefined);
    const b = call(p2);
    p2.destroy();
    const rb = await b.done;
    expect(rb.error).toBeInstanceOf(ConnectError);
    expect((rb.error as ConnectError).code).toBe('ECLOSED');
  });
});

describe('UpstreamPool: waiting for a connection', () => {
  /** One connection whose first request is answered only on `release()`; later ones at once. */
  async function busyWorker(opts: Partial<typeof OPTS>): Promise<{ srv: RawServer; pool: UpstreamPool; arrived: Promise<void>; release: () => void }> {
    let release!: () => void;
    let firstArrived!: () => void;
    const arrived = new Promise<void>((r) => (firstArrived = r));
    const { srv, pool } = await setup(
      (i, sock) => {
        if (i === 0) {
          release = () => sock.write(json('{"i":0}'));
          firstArrived();
          return undefined;
        }
        return [json(`{"i":${i}}`)];
      },
      { ...OPTS, connections: 1, ...opts },
    );
    return { srv, pool, arrived, release: () => release() };
  }

  it('refuses a request past queueMax at once (WorkerQueueError full), leaving the others alone', async () => {
    const { srv, pool, arrived, release } = await busyWorker({ queueMax: 1 });
    const a = call(pool);
    const b = call(pool);
    const c = call(pool);
    // refused synchronously, from dispatch: the caller can go elsewhere before anything else happens
    expect(c.r.events).toEqual(['start', 'error']);
    expect(c.r.error).toBeInstanceOf(WorkerQueueError);
    expect(c.r.error).toMatchObject({ reason: 'full', code: 'EQUEUEFULL', queuedMs: 0 });
    expect(pool.queued).toBe(1);
    await arrived;
    release();
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect([ra.parts.join(''), rb.parts.join('')]).toEqual(['{"i":0}', '{"i":1}']);
    expect(srv.requests).toHaveLength(2);
  });

  it('queueMax 0: nothing waits', async () => {
    const { pool, arrived, release } = await busyWorker({ queueMax: 0 });
    const a = call(pool);
    const b = call(pool);
    expect(b.r.error).toMatchObject({ reason: 'full' });
    await arrived;
    release();
    expect((await a.done).parts.join('')).toBe('{"i":0}');
  });

  it('fails a request that waited queueTimeoutMs (WorkerQueueError timeout) and only that one', async () => {
    const { srv, pool, arrived, release } = await busyWorker({ queueTimeoutMs: 1000 });
    const a = call(pool);
    await arrived;
    // the connection is up (its connect timer is gone): only the queue's timer is left to fake
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const b = call(pool);
      vi.advanceTimersByTime(400);
      const c = call(pool);
      vi.advanceTimersByTime(599);
      expect(b.r.events).toEqual(['start']);
      vi.advanceTimersByTime(1);
      expect(b.r.events).toEqual(['start', 'error']);
      expect(b.r.error).toBeInstanceOf(WorkerQueueError);
      expect(b.r.error).toMatchObject({ reason: 'timeout', code: 'EQUEUETIMEOUT', queuedMs: 1000 });
      // c joined 400 ms later: it has 400 ms left
      expect(pool.queued).toBe(1);
      vi.advanceTimersByTime(399);
      expect(c.r.events).toEqual(['start']);
      vi.advanceTimersByTime(1);
      expect(c.r.error).toMatchObject({ reason: 'timeout', queuedMs: 1000 });
      expect(pool.queued).toBe(0);
    } finally {
      vi.useRealTimers();
    }
    // the request on the connection never noticed
    expect(a.r.events).toEqual(['start', 'sent']);
    release();
    expect((await a.done).parts.join('')).toBe('{"i":0}');
    expect(srv.requests).toHaveLength(1);
  });

  it('an aborted waiting request leaves the queue and its timer finds nothing to fail', async () => {
    const { pool, arrived, release } = await busyWorker({ queueTimeoutMs: 1000 });
    const a = call(pool);
    await arrived;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const b = call(pool);
      b.ctl().abort(new Error('client left'));
      expect(b.r.error?.message).toBe('client left');
      expect(pool.queued).toBe(0);
      vi.advanceTimersByTime(1000);
      expect(b.r.events).toEqual(['start', 'error']);
    } finally {
      vi.useRealTimers();
    }
    release();
    expect((await a.done).events).toEqual(['start', 'sent', 'head', 'end']);
  });
});

describe("UpstreamPool: the gateway's own exhaustion", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('a connect that throws EMFILE synchronously reaches the handler as a LocalResourceError; dispatch does not throw', async () => {
    const { pool } = await setup(() => [json('{}')]);
    vi.spyOn(net, 'connect').mockImplementationOnce(() => {
      const e: NodeJS.ErrnoException = new Error('socket: too many open files');
      e.code = 'EMFILE';
      throw e;
    });
    const a = call(pool);
    expect(a.r.events).toEqual(['start', 'error']);
    expect(a.r.error).toBeInstanceOf(LocalResourceError);
    expect(a.r.error).not.toBeInstanceOf(ConnectError);
    expect(a.r.error).toMatchObject({ code: 'EMFILE', resource: expect.stringContaining('file descriptors') as unknown });
    expect(pool.size).toBe(0);
    // the pool is fine once descriptors are back
    expect((await call(pool).done).status).toBe(200);
  });

  it('a connect that emits ENFILE, ENOBUFS, ENOMEM or EADDRNOTAVAIL is a LocalResourceError too; ECONNREFUSED stays a ConnectError', async () => {
    const { pool } = await setup(() => [json('{}')]);
    const real = net.connect.bind(net);
    for (const code of ['ENFILE', 'ENOBUFS', 'ENOMEM', 'EADDRNOTAVAIL', 'ECONNREFUSED']) {
      vi.spyOn(net, 'connect').mockImplementationOnce(((opts: net.NetConnectOpts) => {
        const sock = real(opts);
        const e: NodeJS.ErrnoException = new Error(`connect ${code}`);
        e.code = code;
        sock.destroy(e);
        return sock;
      }) as typeof net.connect);
      const r = await call(pool).done;
      if (code === 'ECONNREFUSED') expect(r.error).toBeInstanceOf(ConnectError);
      else expect(r.error).toBeInstanceOf(LocalResourceError);
      expect(r.error).toMatchObject({ code });
    }
  });
});
