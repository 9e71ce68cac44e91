// One fuzz case over a raw node:net socket: write its pieces (paced when it trickles), then wait for
// its answers, the server's close, or a quiet spell; half-close when the server may be waiting for
// more; every wait bounded. The outcome is what happened on the wire, judged elsewhere.
import { connect } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import type { FuzzCase } from './cases.js';
import { ResponseReader } from './responses.js';
import type { Response } from './responses.js';

export interface Timing {
  /** A case whose bytes are whole requests: how long its answers may take. */
  caseMs: number;
  /** A case that may be incomplete: no byte from the server for this long, and the client half-closes. */
  quietMs: number;
  /** After the client's FIN: how long the server may take to close. */
  closeMs: number;
}

export interface Outcome {
  /** Final (non-1xx) responses, in order. */
  responses: Response[];
  interim: number;
  /** The server closed its side (FIN or RST). */
  serverClosed: boolean;
  /** ...before we sent our FIN (or left). */
  closedBeforeOurFin: boolean;
  /** We half-closed because nothing more came (or, for a complete case, the time ran out). */
  finSent: boolean;
  /** A complete case whose answers had not all come within caseMs. */
  timedOut: boolean;
  /** After our FIN the server neither answered nor closed within closeMs. */
  hung: boolean;
  malformed: string | undefined;
  /** ECONNREFUSED and the like: is the gateway still there? */
  connectError: string | undefined;
  /** Bytes an unfinished response left when the connection closed. */
  cutShort: number;
  /** Bytes after the expected answers that are not a response (e.g. a body after a HEAD answer's head). */
  trailing: number;
  ms: number;
}

class Signal {
  private waiters: (() => void)[] = [];
  notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  /** Resolves on the next notify() or after `ms`. */
  next(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

export async function runCase(c: FuzzCase, port: number, t: Timing): Promise<Outcome> {
  const started = performance.now();
  const sig = new Signal();
  const reader = new ResponseReader(c.answers.length, (i) => c.answers[i]?.head === true);
  const o: Outcome = {
    responses: reader.finals,
    interim: 0,
    serverClosed: false,
    closedBeforeOurFin: false,
    finSent: false,
    timedOut: false,
    hung: false,
    malformed: undefined,
    connectError: undefined,
    cutShort: 0,
    trailing: 0,
    ms: 0,
  };
  const sock = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  let connected = false;
  let closed = false;
  let left = false;
  let lastActivity = performance.now();
  sock.on('connect', () => {
    connected = true;
    sig.notify();
  });
  sock.on('data', (d: Buffer) => {
    lastActivity = performance.now();
    reader.push(d);
    sig.notify();
  });
  let over = false;
  const serverGone = (): void => {
    if (over) return;
    if (!o.serverClosed) {
      o.serverClosed = true;
      if (!o.finSent && !left) o.closedBeforeOurFin = true;
    }
    sig.notify();
  };
  sock.on('end', () => {
    // the server's FIN ends a body delimited by the close (node:http's own 400s have no length)
    reader.close();
    serverGone();
  });
  sock.on('close', () => {
    closed = true;
    serverGone();
  });
  sock.on('error', (e: NodeJS.ErrnoException) => {
    if (!connected) o.connectError = `${e.code ?? ''} ${e.message}`;
  });
  if (c.noReadMs !== undefined) sock.pause();

  const finish = (): Outcome => {
    over = true;
    if (!sock.destroyed) sock.destroy();
    reader.close();
    o.interim = reader.interim;
    o.malformed = reader.malformed;
    o.trailing = reader.trailing;
    o.cutShort = reader.trailing > 0 ? 0 : reader.pending;
    o.ms = performance.now() - started;
    return o;
  };
  const done = (): boolean => c.answers.length > 0 && reader.finals.length >= c.answers.length;

  while (!connected && !closed && o.connectError === undefined) await sig.next(t.caseMs);
  if (!connected) return finish();

  for (let i = 0; i < c.pieces.length; i++) {
    if (closed || sock.destroyed || sock.writableEnded) break;
    sock.write(c.pieces[i] as Buffer);
    if (c.gapMs > 0 && i < c.pieces.length - 1) await delay(c.gapMs);
  }
  lastActivity = performance.now();

  const until = async (cond: () => boolean, ms: number): Promise<boolean> => {
    const end = performance.now() + ms;
    while (!cond()) {
      const rest = end - performance.now();
      if (rest <= 0) return false;
      await sig.next(rest);
    }
    return true;
  };
  const fin = async (): Promise<void> => {
    o.finSent = true;
    if (!sock.destroyed && !sock.writableEnded) sock.end();
    if (!(await until(() => o.serverClosed || done(), t.closeMs))) o.hung = true;
  };

  switch (c.end) {
    case 'leave':
    case 'reset':
      if (c.noReadMs !== undefined) await delay(c.noReadMs);
      left = true;
      if (c.end === 'reset') sock.resetAndDestroy();
      else sock.destroy();
      return finish();
    case 'leave-on-answer':
      await until(() => reader.received > 0 || closed, t.caseMs);
      left = true;
      return finish();
    case 'half-close':
      await fin();
      return finish();
    default:
      break;
  }
  if (c.complete) {
    if (!(await until(() => done() || o.serverClosed, t.caseMs))) {
      o.timedOut = true;
      await fin();
    }
  } else {
    // the server may rightly wait for bytes that never come: a quiet spell, then our FIN
    const end = performance.now() + t.caseMs;
    while (!done() && !o.serverClosed) {
      const now = performance.now();
      const quietLeft = lastActivity + t.quietMs - now;
      if (quietLeft <= 0 || now >= end) break;
      await sig.next(Math.min(quietLeft, end - now));
    }
    if (!done() && !o.serverClosed) await fin();
  }
  return finish();
}
