// Building blocks of the fuzz cases: a request as editable parts (request line, header fields, body),
// a chunked body as editable chunks, valid OpenAI request bodies, and their serialisation to the
// exact bytes sent. Header text is latin1: one character is one byte, so any byte can be placed.
import type { Rng } from './rng.js';

export interface Req {
  /** Bytes before the request line (empty lines, RFC 9112 §2.2). */
  leading: string;
  method: string;
  target: string;
  version: string;
  /** [name, value] in order; both written as given (latin1), `name: value`. */
  headers: [string, string][];
  /** Raw lines added after the fields, without their CRLF (obs-fold continuations, lines without a colon). */
  rawLines: string[];
  /** Everything after the head, already framed. */
  body: Buffer;
}

export function req(method: string, target: string, headers: [string, string][] = [], body: Buffer = Buffer.alloc(0)): Req {
  return { leading: '', method, target, version: 'HTTP/1.1', headers, rawLines: [], body };
}

export function headOf(r: Req): Buffer {
  let s = `${r.leading}${r.method} ${r.target} ${r.version}\r\n`;
  for (const [n, v] of r.headers) s += `${n}: ${v}\r\n`;
  for (const l of r.rawLines) s += `${l}\r\n`;
  return Buffer.from(`${s}\r\n`, 'latin1');
}

export function bytesOf(r: Req): Buffer {
  return Buffer.concat([headOf(r), r.body]);
}

export function getHeader(r: Req, name: string): string | undefined {
  const l = name.toLowerCase();
  return r.headers.find(([n]) => n.toLowerCase() === l)?.[1];
}

/** Replace every field named `name` (any case) by one with `value`, or add it. */
export function setHeader(r: Req, name: string, value: string): void {
  const l = name.toLowerCase();
  const i = r.headers.findIndex(([n]) => n.toLowerCase() === l);
  if (i === -1) {
    r.headers.push([name, value]);
    return;
  }
  r.headers[i] = [name, value];
  r.headers = r.headers.filter(([n], j) => j <= i || n.toLowerCase() !== l);
}

export function removeHeader(r: Req, name: string): void {
  const l = name.toLowerCase();
  r.headers = r.headers.filter(([n]) => n.toLowerCase() !== l);
}

/** Frame `body` with Content-Length (and no Transfer-Encoding). */
export function withLength(r: Req, body: Buffer): Req {
  removeHeader(r, 'transfer-encoding');
  setHeader(r, 'Content-Length', String(body.length));
  r.body = body;
  return r;
}

/** Frame with Transfer-Encoding: chunked (and no Content-Length). */
export function withChunked(r: Req, c: Chunked): Req {
  removeHeader(r, 'content-length');
  setHeader(r, 'Transfer-Encoding', 'chunked');
  r.body = encodeChunked(c);
  return r;
}

// ---- chunked bodies ------------------------------------------------------------------------

export interface Chunk {
  /** The size as written (hex digits, maybe padded or upper case). */
  size: string;
  /** Extensions after the size, e.g. ';a=b'. */
  ext: string;
  /** End of the size line (CRLF unless mutated). */
  eol: string;
  data: Buffer;
  /** After the data (CRLF unless mutated). */
  after: string;
}

export interface Chunked {
  chunks: Chunk[];
  /** The last chunk's size line ('0' …), its extensions and line end. */
  last: { size: string; ext: string; eol: string };
  /** Trailer lines, each with its line end. */
  trailers: string[];
  /** The empty line that ends the body. */
  end: string;
}

export function encodeChunked(c: Chunked): Buffer {
  const parts: Buffer[] = [];
  for (const ch of c.chunks) {
    parts.push(Buffer.from(`${ch.size}${ch.ext}${ch.eol}`, 'latin1'), ch.data, Buffer.from(ch.after, 'latin1'));
  }
  parts.push(Buffer.from(`${c.last.size}${c.last.ext}${c.last.eol}${c.trailers.join('')}${c.end}`, 'latin1'));
  return Buffer.concat(parts);
}

const EXTENSIONS = [';a', ';a=b', ';q="x y"', ' ;e', '\t;e=1', ';name=value;other', `;${'x'.repeat(100)}`];

/** Hex for `n` as a client might write it: lower or upper case, maybe zero-padded (never past 16 digits). */
export function hexSize(rng: Rng, n: number): string {
  let h = n.toString(16);
  if (rng.chance(0.3)) h = h.toUpperCase();
  if (rng.chance(0.15)) h = h.padStart(Math.min(16, h.length + rng.int(1, 4)), '0');
  return h;
}

export type SplitMode = 'random' | 'one' | 'ones' | 'tiny' | 'halves';

/** `body` as a valid chunked body split by `mode`, with random but valid extensions and trailers. */
export function chunkBody(rng: Rng, body: Buffer, mode: SplitMode): Chunked {
  const chunks: Chunk[] = [];
  const extOften = rng.chance(0.2);
  const at = (from: number, n: number): Chunk => ({
    size: hexSize(rng, n),
    ext: extOften && rng.chance(0.5) ? rng.pick(EXTENSIONS) : '',
    eol: '\r\n',
    data: body.subarray(from, from + n),
    after: '\r\n',
  });
  let i = 0;
  while (i < body.length) {
    let n: number;
    switch (mode) {
      case 'one':
        n = body.length;
        break;
      case 'ones':
        n = 1;
        break;
      case 'tiny':
        n = rng.int(1, 4);
        break;
      case 'halves':
        n = Math.max(1, Math.ceil((body.length - i) / 2));
        break;
      default:
        n = rng.size(1, Math.max(1, body.length));
    }
    n = Math.min(n, body.length - i);
    chunks.push(at(i, n));
    i += n;
  }
  const trailers: string[] = [];
  if (rng.chance(0.15))
    for (let k = rng.int(1, 3); k > 0; k--) trailers.push(`${rng.pick(['X-Trailer', 'Checksum', 'x-t'])}: ${rng.pick(['1', 'abc', '', 'a b c'])}\r\n`);
  return {
    chunks,
    last: { size: rng.chance(0.1) ? '000' : '0', ext: extOften && rng.chance(0.3) ? rng.pick(EXTENSIONS) : '', eol: '\r\n' },
    trailers,
    end: '\r\n',
  };
}

// ---- request bodies -------------------------------------------------------------------------

const WORDS = ['the', 'harbour', 'light', 'a', 'slow', 'river', 'of', 'numbers', 'tell', 'me', 'why', 'gateway', 'model', 'canary', 'blue', 'green'];

export function prompt(rng: Rng, words = rng.int(1, 8)): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(rng.pick(WORDS));
  return out.join(' ');
}

/** A valid chat completion request: few tokens so that the simulated worker answers at once. */
export function chatObject(rng: Rng, model: string, stream = false): Record<string, unknown> {
  const o: Record<string, unknown> = { model, messages: [{ role: 'user', content: prompt(rng) }], max_tokens: rng.int(1, 3) };
  if (rng.chance(0.5)) o.temperature = rng.pick([0, 0.5, 1]);
  if (stream) o.stream = true;
  else if (rng.chance(0.2)) o.stream = false;
  if (rng.chance(0.2)) o.user = `u${rng.int(1, 99)}`;
  if (rng.chance(0.1)) (o.messages as unknown[]).unshift({ role: 'system', content: 'be brief' });
  return o;
}

export function completionsObject(rng: Rng, model: string): Record<string, unknown> {
  return { model, prompt: prompt(rng), max_tokens: rng.int(1, 3) };
}

export function json(v: unknown): Buffer {
  return Buffer.from(JSON.stringify(v), 'utf8');
}

/** Arrays nested `depth` deep: [[[…]]]. */
export function nestedArrays(depth: number): string {
  return `${'['.repeat(depth)}${']'.repeat(depth)}`;
}

/** Objects nested `depth` deep: {"a":{"a":…{}}}. */
export function nestedObjects(depth: number): string {
  return `${'{"a":'.repeat(depth)}{}${'}'.repeat(depth)}`;
}

/** Does `b` parse as JSON once decoded as UTF-8 (what the gateway does)? */
export function parsesAsJson(b: Buffer): boolean {
  try {
    JSON.parse(b.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** The common headers a client sends, in a random order and case, Host first or not. */
export function clientHeaders(rng: Rng, host: string, json: boolean): [string, string][] {
  const h: [string, string][] = [];
  if (rng.chance(0.6)) h.push([rng.pick(['User-Agent', 'user-agent']), rng.pick(['OpenAI/Python 1.99.0', 'curl/8.5.0', 'fuzz'])]);
  if (rng.chance(0.5)) h.push(['Accept', rng.pick(['*/*', 'application/json', 'text/event-stream'])]);
  if (json) h.push([rng.pick(['Content-Type', 'content-type']), rng.pick(['application/json', 'application/json', 'application/json; charset=utf-8'])]);
  if (rng.chance(0.2)) h.push(['X-Session-Id', `s${rng.int(1, 9)}`]);
  if (rng.chance(0.15)) h.push(['Connection', 'keep-alive']);
  if (rng.chance(0.1)) h.push(['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']);
  const at = rng.chance(0.8) ? 0 : rng.int(0, h.length);
  h.splice(at, 0, [rng.pick(['Host', 'host', 'HOST']), host]);
  return h;
}
