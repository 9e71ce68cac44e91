// The data plane's listener over node:net: admission at accept (the connection ceiling, its probe slots, per-client limits), which
// protocol a connection speaks — HTTP/2's preface goes to front-h2.ts, anything else is an HTTP/1.1 connection (front-conn.ts) — and
// what an admitted connection holds until it closes.
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { DEFAULTS } from '../defaults.js';
import { refuseConnection } from './http1/response-writer.js';
import { FrontConfig } from './http1/server-options.js';
import type { FrontHandler, FrontOptions } from './http1/server-options.js';
import { Conn } from './front-conn.js';
import { H2Front, prefaceMatch } from './front-h2.js';

export type { FrontEvents, FrontHandler, FrontOptions, FrontRequest, FrontResponse } from './http1/server-options.js';

/**
 * Read a connection's first bytes until they tell HTTP/2's preface from anything else, then hand the connection over with them.
 * One that sends nothing (or only a prefix of the preface) for the request timeout is closed.
 */
function sniff(socket: Socket, cfg: FrontConfig, h2: H2Front, addr: string, probeOnly: boolean): void {
  let lead: Buffer | null = null;
  const ms = cfg.requestMs > 0 ? cfg.requestMs : cfg.keepAliveMs;
  const timer = ms > 0 ? setTimeout(() => socket.destroy(), ms) : null;
  timer?.unref();
  const done = (): void => {
    if (timer !== null) clearTimeout(timer);
    socket.removeListener('data', onData);
    socket.removeListener('end', onEnd);
    socket.removeListener('close', done);
  };
  const onData = (chunk: Buffer): void => {
    lead = lead === null ? chunk : Buffer.concat([lead, chunk]);
    const m = prefaceMatch(lead);
    if (m === 0) return;
    done();
    if (m > 0) h2.adopt(socket, lead, addr, probeOnly);
    else new Conn(socket, cfg, addr, probeOnly, lead);
  };
  // the client left before saying anything: nothing to answer
  const onEnd = (): void => {
    done();
    socket.end();
  };
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.on('close', done);
}

/** A net.Server serving HTTP/1.1 with `handler` (and HTTP/2 with prior knowledge when `opts.http2`); closeAllConnections() destroys every open socket. */
export function createFrontServer(handler: FrontHandler, opts: FrontOptions): Server & { closeAllConnections(): void } {
  const cfg = new FrontConfig(handler, opts);
  const h2 = opts.http2 === undefined ? null : new H2Front(cfg, opts.http2);
  const open = new Set<Socket>();
  const serve = (socket: Socket, addr: string, probeOnly: boolean): void => {
    open.add(socket);
    // an admitted connection holds its place (a probe slot past the ceiling) until it closes, whatever it speaks
    socket.once('close', () => {
      open.delete(socket);
      if (probeOnly) cfg.probeOpen--;
      else cfg.limits?.close(addr);
    });
    socket.on('error', noop); // ECONNRESET, EPIPE…: 'close' follows
    if (h2 !== null) sniff(socket, cfg, h2, addr, probeOnly);
    else new Conn(socket, cfg, addr, probeOnly, null);
  };
  // half-open so that a client's FIN is ours to handle (see Conn.onEnd)
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    const addr = socket.remoteAddress ?? '';
    const limits = cfg.limits;
    const why = limits?.admit(addr);
    if (limits === null || why === undefined) {
      serve(socket, addr, false);
    } else if (why === 'capacity' && cfg.probePaths !== null && cfg.probeOpen < DEFAULTS.limits.probeConnections) {
      cfg.probeOpen++;
      serve(socket, addr, true);
    } else {
      cfg.events.refused?.(why, addr);
      refuseConnection(socket, why, limits, cfg.errorBody);
    }
  });
  return Object.assign(server, {
    closeAllConnections(): void {
      for (const s of open) s.destroy();
    },
  });
}

function noop(): void {}
