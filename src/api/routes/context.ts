// What every admin route file is built with, and the helpers they share (the model in the path,
// the acting principal, long operations with optional progress events).
import type { Controllers } from '../../control/controllers.js';
import type { ControlPlane } from '../../control/plane.js';
import type { Actor } from '../../rollout/ports.js';
import type { Ctx } from '../router.js';
import { toGlidepathError } from '../../errors.js';

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
