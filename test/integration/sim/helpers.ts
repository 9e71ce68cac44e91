// Test helpers for the simulator: JSON POSTs, SSE parsing, and a raw stream reader that survives crashes.
import { request } from 'node:http';

export interface Reply {
  status: number;
  text: string;
  headers: Headers;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- test responses are checked field by field
}

export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const init: RequestInit = { method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers } };
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  const r = await fetch(base + path, init);
  const text = await r.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, text, headers: r.headers, json };
}

export const post = (base: string, path: string, body: unknown, headers?: Record<string, string>) => call(base, 'POST', path, body, headers);
export const get = (base: string, path: string) => call(base, 'GET', path);

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
}

/** JSON chunks of an SSE body (without the final [DONE]). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- chunks are checked field by field
export function chunks(text: string): any[] {
  return sseData(text)
    .filter((d) => d !== '[DONE]')
    .map((d) => JSON.parse(d) as unknown);
}

/** Concatenated streamed text of a chat or completions stream. */
export function streamedText(text: string): string {
  return chunks(text)
    .map((c) => (c.choices[0]?.delta?.content ?? c.choices[0]?.text ?? '') as string)
    .join('');
}

/** POST and read the raw body until the server ends or drops the connection. */
export function rawPost(base: string, path: string, body: unknown): Promise<{ status: number; text: string; complete: boolean }> {
  const u = new URL(base + path);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('error', () => {});
      res.on('close', () => resolve({ status: res.statusCode ?? 0, text, complete: res.complete }));
    });
    req.on('error', (e) => reject(e));
    req.end(JSON.stringify(body));
  });
}

export const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: 'sim-model',
  messages: [{ role: 'user', content }],
  temperature: 0,
  ...extra,
});
