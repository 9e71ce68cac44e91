// Chunked-body cases: valid JSON split every way down to 1-byte chunks, with extensions and
// trailers, and one thing wrong (sizes that are not hex, too long or overflowing, extensions with
// controls, missing CRLFs, bad or huge trailers, truncation, a body over the limit in real bytes).
import type { Rng } from './rng.js';
import { host, splitPieces } from './cases.js';
import type { Built, GenContext, Want } from './cases.js';
import { chatObject, chunkBody, clientHeaders, completionsObject, encodeChunked, headOf, json, prompt, req, setHeader, withChunked } from './requests.js';
import type { Chunk, Chunked, SplitMode } from './requests.js';

export interface Body {
  path: string;
  obj: Record<string, unknown>;
}

export function validBody(rng: Rng, ctx: GenContext): Body {
  if (rng.chance(0.2)) return { path: '/v1/completions', obj: completionsObject(rng, ctx.model) };
  const obj = chatObject(rng, ctx.model, rng.chance(0.2));
  if (rng.chance(0.3)) obj.messages = [{ role: 'user', content: prompt(rng, rng.int(10, 80)) }];
  return { path: '/v1/chat/completions', obj };
}

export function pickSplit(rng: Rng): SplitMode {
  return rng.weighted<SplitMode>([
    ['random', 5],
    ['one', 2],
    ['ones', 1],
    ['tiny', 2],
    ['halves', 1],
  ]);
}

const CTL = ['\x00', '\x01', '\x08', '\x0b', '\x1b', '\x7f'];

/** A body of `n` bytes in chunks of 64 KiB to 1 MiB (real bytes on the wire). */
function bulkChunks(rng: Rng, n: number): Chunked {
  const chunks: Chunk[] = [];
  const fill = Buffer.alloc(1 << 20, 0x61);
  for (let left = n; left > 0;) {
    const k = Math.min(left, rng.int(64 * 1024, 1 << 20));
    chunks.push({ size: k.toString(16), ext: '', eol: '\r\n', data: fill.subarray(0, k), after: '\r\n' });
    left -= k;
  }
  return { chunks, last: { size: '0', ext: '', eol: '\r\n' }, trailers: [], end: '\r\n' };
}

export function chunkedCase(rng: Rng, ctx: GenContext): Built {
  const b = validBody(rng, ctx);
  const mode = pickSplit(rng);
  const c = chunkBody(rng, json(b.obj), mode);
  const r = req('POST', b.path, clientHeaders(rng, host(rng), true));
  const labels = [`POST ${b.path} chunked:${mode}`];
  let want: Want = 'ok';
  let complete = true;
  let cutAt = -1;
  let halfClose = false;
  let extraHeaders: [string, string][] = [];
  if (rng.chance(0.7)) {
    const k = rng.int(0, c.chunks.length - 1);
    const ch = c.chunks[k] as Chunk;
    const m = rng.weighted<string>([
      ['size-not-hex', 3],
      ['size-too-many-digits', 1],
      ['size-overflow', 2],
      ['size-line-long', 1],
      ['ext-ctl', 1],
      ['ext-bad', 1],
      ['ext-long-ok', 1],
      ['data-no-crlf', 3],
      ['size-bare-lf', 1],
      ['size-bare-cr', 1],
      ['size-too-small', 2],
      ['size-too-big', 1],
      ['trailer-bad', 2],
      ['trailer-bare-lf', 1],
      ['trailer-huge', 1],
      ['trailers-big-ok', 1],
      ['missing-end', 1],
      ['missing-last-chunk', 1],
      ['truncated', 2],
      ['te-and-cl', 1],
      ['te-http10', 1],
      ['te-case', 1],
      ['invalid-json', 2],
      ['expect-continue', 1],
      ['over-limit-bytes', ctx.scale.overLimitBytesWeight],
    ]);
    labels.push(m);
    switch (m) {
      case 'size-not-hex':
        ch.size = rng.pick(['zz', 'g', '0x5', '+5', '-1', ' 5', '', '5 5', '\xff', '0x', 'h']);
        want = 'reject';
        break;
      case 'size-too-many-digits':
        ch.size = ch.data.length.toString(16).padStart(rng.int(17, 40), '0');
        want = 'reject';
        break;
      case 'size-overflow':
        ch.size = rng.pick(['ffffffffffffffff', 'FFFFFFFFFFFFFFFF', (ctx.maxBodyBytes + 1).toString(16), '7fffffff', '100000000']);
        want = 'reject';
        break;
      case 'size-line-long':
        ch.ext = `;${'x'.repeat(rng.int(4100, 6000))}`;
        want = 'reject';
        break;
      case 'ext-ctl':
        ch.ext = `;a=${rng.pick(CTL)}`;
        want = 'reject';
        break;
      case 'ext-bad':
        ch.ext = rng.pick(['x', ' x', '=a', ',a', 'g', ' ', '\t']);
        want = 'reject';
        break;
      case 'ext-long-ok':
        ch.ext = `;${'e'.repeat(rng.int(100, 3000))}`;
        break;
      case 'data-no-crlf':
        ch.after = rng.pick(['', 'XX', '\n', '\r', ' \r\n', '\r\r\n', '\n\r']);
        want = 'reject';
        break;
      case 'size-bare-lf':
        ch.eol = '\n';
        want = 'reject';
        break;
      case 'size-bare-cr':
        ch.eol = '\r';
        want = 'reject';
        break;
      case 'size-too-small':
        if (ch.data.length >= 2) {
          // the data goes on where the CRLF should be
          ch.size = (ch.data.length - rng.int(1, ch.data.length - 1)).toString(16);
          want = 'reject';
        } else {
          ch.size = 'q';
          want = 'reject';
        }
        break;
      case 'size-too-big':
        ch.size = (ch.data.length + rng.int(1, 20)).toString(16);
        want = 'any';
        complete = false;
        break;
      case 'trailer-bad':
        c.trailers.push(`${rng.pick(['no colon', 'X T: v', ': v', 'X\x01: v', 'X: a\x01b', 'X: a\rb', ' X: folded', '[x]: v'])}\r\n`);
        want = 'reject';
        break;
      case 'trailer-bare-lf':
        c.trailers.push('X-T: 1\n');
        want = 'reject';
        break;
      case 'trailer-huge': {
        const total = rng.int(ctx.maxHeaderBytes + 100, ctx.maxHeaderBytes * 2);
        const line = rng.int(20, 4000);
        for (let n = 0; n < total; n += line + 8) c.trailers.push(`X-T: ${'t'.repeat(line)}\r\n`);
        want = 'reject';
        break;
      }
      case 'trailers-big-ok':
        for (let i = rng.int(1, 30); i > 0; i--) c.trailers.push(`X-T${i}: ${'t'.repeat(rng.int(1, 300))}\r\n`);
        break;
      case 'missing-end':
        c.end = '';
        want = 'any';
        complete = false;
        break;
      case 'missing-last-chunk':
        c.last = { size: '', ext: '', eol: '' };
        c.end = '';
        c.trailers = [];
        want = 'any';
        complete = false;
        break;
      case 'truncated':
        cutAt = rng.int(1, encodeChunked(c).length - 1);
        halfClose = rng.chance(0.5);
        want = 'any';
        complete = false;
        break;
      case 'te-and-cl':
        extraHeaders = [['Content-Length', String(rng.int(0, 100))]];
        want = 'reject';
        break;
      case 'te-http10':
        r.version = 'HTTP/1.0';
        want = 'reject';
        break;
      case 'te-case':
        extraHeaders = [['Transfer-Encoding', rng.pick(['Chunked', 'CHUNKED', ' chunked ', 'chunked\t'])]];
        break;
      case 'invalid-json': {
        const bytes = json(b.obj);
        const cut = bytes.subarray(0, rng.int(1, bytes.length - 1));
        const cc = chunkBody(rng, cut, mode);
        c.chunks = cc.chunks;
        want = 'reject';
        break;
      }
      case 'expect-continue':
        extraHeaders = [['Expect', '100-continue']];
        break;
      default: {
        // over the limit in real bytes: refused (413) once the sizes cross it
        const big = bulkChunks(rng, ctx.maxBodyBytes + rng.int(1, 4096));
        c.chunks = big.chunks;
        want = 'reject';
      }
    }
  }
  withChunked(r, c);
  for (const [n, v] of extraHeaders) {
    if (n === 'Transfer-Encoding') setHeader(r, n, v);
    else r.headers.push([n, v]);
  }
  if (cutAt >= 0) r.body = r.body.subarray(0, cutAt);
  const all = Buffer.concat([headOf(r), r.body]);
  const split = rng.chance(0.3);
  return {
    label: labels.join(' | '),
    target: 'data',
    pieces: split ? splitPieces(rng, all, rng.int(2, 8)) : [all],
    gapMs: split && rng.chance(0.5) ? 1 : 0,
    answers: [{ want, head: false }],
    complete,
    end: halfClose ? 'half-close' : 'wait',
    mayCloseSilently: !complete,
  };
}
