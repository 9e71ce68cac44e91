// What every admin route file is built with, and the helpers they share (the model in the path,
// the acting principal, long operations with optional progress events, bounded event streams).
import type { Controllers } from '../../control/controllers.js';
import type { ControlPlane } from '../../control/plane.js';
import type { Actor, EventPage } from '../../rollout/ports.js';
import type { ServerResponse } from 'node:http';
import { DEFAULTS } from '../../defaults.js';
import { MiB } from '../../defaults/units.js';
import type { Ctx } from '../router.js';
import { BadRequestError, toGlidepathError } from '../../errors.js';

export interface AdminContext {
  /** Registry, inventory, data plane and store reads for the views; changes go through the controllers. */
  readonly cp: ControlPlane;
  readonly controllers: Controllers;
}

/** The `:model` path parameter, checked against the config (404 `model_not_found` naming the models). */
export function modelOf(cp: ControlPlane, c: Ctx): string {
  const m = c.params.model as string;
  cp.modelConfig(m);
  return m;
}

export function actorOf(c: Ctx): Actor {
  return { name: c.principal.name };
}

/** A handler's answer meaning "the response was already written" (a progress stream). */
export const RAW = Symbol('raw');

/** Bytes a stream's client may leave unread: a client that does not read holds no more than this. */
const MAX_UNSENT = MiB;

/**
 * A server-sent event stream on a raw route's response, kept alive by a comment every `pingMs`.
 * `start` is given `send`, sends what it has, subscribes and returns its unsubscribe, called once the
 * stream ends. `send` writes one event unless the client has left MAX_UNSENT unread: then `behind`
 * says what happens — `drop` the event (samples: the next one replaces it) or `close` the stream (a
 * change log: the client reconnects with Last-Event-ID and is sent what it missed).
 */
export function eventStream(
  res: ServerResponse,
  o: { behind: 'drop' | 'close'; retryMs?: number; pingMs?: number },
  start: (send: (event: string) => void) => () => void,
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  if (o.retryMs !== undefined) res.write(`retry: ${o.retryMs}\n\n`);
  const ping = setInterval(() => res.write(': ping\n\n'), o.pingMs ?? DEFAULTS.dashboard.eventPingMs);
  const unsubscribe = start((event) => {
    if (res.writableLength <= MAX_UNSENT) res.write(event);
    else if (o.behind === 'close') res.destroy();
  });
  // (a stream cut off while `start` sent its backlog closes on a later turn: the listener is there)
  res.on('close', () => {
    clearInterval(ping);
    unsubscribe();
  });
}

/**
 * Run a long operation: JSON when awaited plainly; with `Accept: text/event-stream`, progress
 * events followed by a final `result` or `error` event.
 */
export async function longOp(ctx: Ctx, fn: (progress: (m: string) => void) => Promise<unknown>): Promise<unknown> {
  if (!(ctx.req.headers.accept ?? '').includes('text/event-stream')) return fn(() => undefined);
  const res = ctx.res;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  try {
    const r = await fn((m) => send('progress', { message: m, at: Date.now() }));
    send('result', r);
  } catch (err) {
    // the body sendErr answers with (an unexpected exception is an internal_error, as there), plus the status
    const e = toGlidepathError(err);
    send('error', { error: { message: e.message, type: e.type, code: e.code, status: e.status, ...(e.details ? { details: e.details } : {}) } });
  }
  res.end();
  return RAW;
}

/** An event sequence number from `Last-Event-ID`, `?since=` or `?after=`: a non-negative integer. */
export function eventSeq(v: string, where: string): number {
  const n = /^\d+$/.test(v.trim()) ? Number(v.trim()) : NaN;
  if (!Number.isSafeInteger(n))
    throw new BadRequestError(
      'invalid_query',
      `${where}: expected an event sequence number (a non-negative integer, the id of the last event received), got ${JSON.stringify(v.slice(0, 100))}`,
    );
  return n;
}

/** A rollout's event list's page: `?after=` (the last sequence number read) and `?limit=` (1 to 10,000); a bad one is a 400 naming it. */
export function eventPage(q: URLSearchParams): EventPage {
  const after = q.get('after');
  const limitS = q.get('limit');
  const max = DEFAULTS.store.rolloutEventsMaxLimit;
  const limit = limitS === null ? undefined : /^\d+$/.test(limitS) ? Number(limitS) : NaN;
  if (limit !== undefined && !(limit >= 1 && limit <= max))
    throw new BadRequestError('invalid_query', `limit: expected an integer from 1 to ${max}, got ${JSON.stringify(limitS?.slice(0, 100))}`);
  return { afterSeq: after === null ? undefined : eventSeq(after, 'after'), limit };
}
