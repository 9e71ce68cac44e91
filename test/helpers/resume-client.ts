// What a client makes of a resumed stream, and scripted workers' pieces of one: shared by the gateway's resume tests.
import type { ParsedRequest } from '../../src/gateway/request.js';
import { sseData } from './gateway.js';
import type { Behaviour } from './upstream.js';

/** A streaming request as the gateway parsed it, with `body`'s fields (the resume planner's input). */
export const streamRequest = (body: Record<string, unknown>): ParsedRequest => ({
  raw: Buffer.alloc(0),
  body: { stream: true, ...body },
  model: 'm',
  stream: true,
  user: undefined,
  maxTokens: undefined,
});

export interface Read {
  ids: Set<string>;
  created: Set<number>;
  roles: number;
  text: string;
  finish: string | null;
  usage: Record<string, number> | undefined;
  errors: unknown[];
  done: boolean;
}

/** What a client makes of a stream. */
export function read(body: string, chat: boolean): Read {
  const r: Read = { ids: new Set(), created: new Set(), roles: 0, text: '', finish: null, usage: undefined, errors: [], done: false };
  for (const d of sseData(body)) {
    if (d === '[DONE]') {
      r.done = true;
      continue;
    }
    const e = JSON.parse(d) as {
      id?: string;
      created?: number;
      error?: unknown;
      usage?: Record<string, number>;
      choices?: { text?: string; delta?: { role?: string; content?: string }; finish_reason?: string | null }[];
    };
    if (e.error !== undefined) {
      r.errors.push(e.error);
      continue;
    }
    if (e.id !== undefined) r.ids.add(e.id);
    if (e.created !== undefined) r.created.add(e.created);
    if (e.usage) r.usage = e.usage;
    for (const c of e.choices ?? []) {
      if (c.delta?.role !== undefined) r.roles++;
      r.text += (chat ? c.delta?.content : c.text) ?? '';
      if (c.finish_reason) r.finish = c.finish_reason;
    }
  }
  return r;
}

export const ID = 'chatcmpl-original';
export function chatEvent(content: string | undefined, extra: Record<string, unknown> = {}, id = ID, created = 1700000000): string {
  const delta = content === undefined ? { role: 'assistant', content: '' } : { content };
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }] })}\n\n`;
}

/** Write raw byte pieces (cut wherever the test says), then drop the connection (or end the response). */
export function piecesThenDrop(pieces: readonly Buffer[], then: 'drop' | 'end' = 'drop'): Behaviour {
  return async (c) => {
    c.res.writeHead(200, { 'content-type': 'text/event-stream' });
    c.res.flushHeaders();
    for (const p of pieces) await new Promise<void>((r) => c.res.write(p, () => r()));
    if (then === 'end') c.res.end();
    else c.res.socket?.destroy();
  };
}
