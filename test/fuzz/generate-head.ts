// Request-head cases for the data plane (the admin API reuses the mutations): valid requests with
// structural mutations (framing, method, target, version, Host, field syntax, sizes) whose verdict
// is known, and byte-level ones (flips, inserted CR/LF/NUL/controls, deletions, truncation) whose is not.
import type { Rng } from './rng.js';
import { dataRequest, headOver, methodOf, pickDataKind, splitPieces } from './cases.js';
import type { Built, GenContext, Want } from './cases.js';
import { bytesOf, getHeader, removeHeader, setHeader } from './requests.js';
import type { Req } from './requests.js';

interface Effect {
  want: Want;
  /** For rfc-reject / rfc-ok: what the RFC says. */
  rfc?: string;
  /** False when the request may now be incomplete (the server may wait for more). */
  complete?: boolean;
}

export interface HeadMutation {
  name: string;
  weight: number;
  /** Changes `r`; returns what the change alone makes of a valid request. */
  apply(rng: Rng, r: Req, ctx: GenContext): Effect;
}

const NON_TOKEN_METHODS = ['GE(T', 'GET\x00', 'GE\x7fT', 'G\tET', '\xefGET', '', 'GET:', 'G"T', 'GET/'];
const TOKEN_METHODS = ['FOO', 'PRI', 'get', 'Get', 'CONNECT', 'TRACE', 'OPTIONS', 'DELETE', 'PUT', 'PATCH', 'M'.repeat(300), "G'T", 'POST!'];
/** HTTP versions the data plane answers 505 (well-formed, not 1.0 or 1.1). */
const VERSIONS_505 = ['HTTP/2.0', 'HTTP/1.2', 'HTTP/3.0', 'HTTP/0.9', 'HTTP/9.9'];
const VERSIONS_400 = [
  'http/1.1',
  'HTTP/1.10',
  'HTTP/1',
  'HTTP/1.1x',
  'HTTP/ 1.1',
  'HTTPS/1.1',
  'HTTP/1.1 ',
  'HTTP/\xb9.1',
  'HTTP/1,1',
  'HTTP/11',
  'HTTP/1.1\x00',
];
/** Host values RFC 9112 §3.2 says a server MUST answer 400 (not a uri-host [":" port]). */
const INVALID_HOSTS = ['a b', 'user@evil', 'a,b', '[::1', 'h\xe9', 'a/b', 'a:b:c', '%zz', 'a:port', 'a?b'];
const BAD_NAMES = ['X A', 'X\x00A', 'X\xfcA', 'X(A)', 'X"A', 'X\x7fA', '[X]', 'X/A', 'X@A', 'X{A}'];
const CTL = ['\x00', '\x01', '\x08', '\x0b', '\x0c', '\x1b', '\x7f', '\r', '\n'];
const TE_UNSUPPORTED = [
  'gzip',
  'gzip, chunked',
  'chunked, chunked',
  'identity',
  'xchunked',
  'chunked;q=1',
  'deflate',
  'chunked, gzip',
  '"chunked"',
  'chunkedx',
  'chunked\x0b',
];
const PATH_GARBAGE = ['%', '%zz', '%E0%A4%A', '%00', '/..', '%2e%2e', '\\', '#frag', ';x', '%C0%AF', '%%', '/.', '%2F'];
const QUERY_GARBAGE = ['%zz', '%', 'a=%E0%A4%A', 'a&&&=', '==', '?', 'a=%00', `${'k=v&'.repeat(20)}`];

function clOf(r: Req): number {
  const v = getHeader(r, 'content-length');
  return v === undefined ? 0 : Number(v);
}

export const HEAD_MUTATIONS: HeadMutation[] = [
  {
    name: 'cl-conflict',
    weight: 3,
    apply: (rng, r) => {
      const n = clOf(r);
      if (getHeader(r, 'content-length') === undefined) r.headers.push(['Content-Length', '0']);
      if (rng.chance(0.5)) r.headers.push([rng.pick(['Content-Length', 'content-length']), String(n + rng.int(1, 9))]);
      else setHeader(r, 'Content-Length', `${n}, ${n + rng.int(1, 9)}`);
      return { want: 'reject' };
    },
  },
  {
    name: 'cl-repeat-same',
    weight: 1,
    apply: (rng, r) => {
      const n = String(clOf(r));
      if (getHeader(r, 'content-length') === undefined) r.headers.push(['Content-Length', n]);
      if (rng.chance(0.5)) r.headers.push(['Content-Length', n]);
      else setHeader(r, 'Content-Length', `${n}, ${n}`);
      return { want: 'ok' };
    },
  },
  {
    name: 'cl-malformed',
    weight: 3,
    apply: (rng, r) => {
      const n = clOf(r);
      setHeader(r, 'Content-Length', rng.pick([`+${n}`, '-1', 'abc', '', '0x10', `${n} ${n}`, `${n}.0`, `${n};`, '\xb9', `${n},`, `,${n}`, `${n}e0`]));
      return { want: 'reject' };
    },
  },
  {
    name: 'cl-huge',
    weight: 2,
    apply: (rng, r, ctx) => {
      setHeader(
        r,
        'Content-Length',
        rng.pick([String(ctx.maxBodyBytes + 1), '99999999999999999999', '18446744073709551616', '9007199254740993', '1'.repeat(300)]),
      );
      return { want: 'reject' };
    },
  },
  {
    name: 'cl-long',
    weight: 1,
    apply: (rng, r) => {
      setHeader(r, 'Content-Length', String(clOf(r) + rng.int(1, 50)));
      return { want: 'any', complete: false };
    },
  },
  {
    name: 'cl-short',
    weight: 1,
    apply: (rng, r) => {
      const n = clOf(r);
      if (n < 2) {
        // nothing to cut: declare a body that never comes
        setHeader(r, 'Content-Length', String(n + 1));
        return { want: 'any', complete: false };
      }
      // the declared part is a proper prefix of a JSON object: never valid JSON
      setHeader(r, 'Content-Length', String(rng.int(1, n - 1)));
      return { want: 'reject' };
    },
  },
  {
    name: 'te-with-cl',
    weight: 2,
    apply: (rng, r) => {
      if (getHeader(r, 'content-length') === undefined) r.headers.push(['Content-Length', '0']);
      r.headers.push([rng.pick(['Transfer-Encoding', 'transfer-encoding']), 'chunked']);
      return { want: 'reject' };
    },
  },
  {
    name: 'te-unsupported',
    weight: 2,
    apply: (rng, r) => {
      removeHeader(r, 'content-length');
      r.headers.push(['Transfer-Encoding', rng.pick(TE_UNSUPPORTED)]);
      return { want: 'reject' };
    },
  },
  {
    name: 'te-http10',
    weight: 1,
    apply: (_rng, r) => {
      removeHeader(r, 'content-length');
      r.version = 'HTTP/1.0';
      r.headers.push(['Transfer-Encoding', 'chunked']);
      r.body = Buffer.from('0\r\n\r\n', 'latin1');
      return { want: 'reject' };
    },
  },
  {
    name: 'headers-many',
    weight: 2,
    apply: (rng, r) => {
      const n = rng.size(10, 2500);
      for (let i = 0; i < n; i++) r.headers.push([`X-Fuzz-${i}`, rng.pick(['v', '1', 'abc'])]);
      return { want: 'ok' }; // 431 once over the limit: see headOver in headCase
    },
  },
  {
    name: 'header-value-huge',
    weight: 2,
    apply: (rng, r) => {
      r.headers.push([rng.pick(['X-Big', 'Cookie', 'User-Agent2']), 'v'.repeat(rng.size(1000, 24000))]);
      return { want: 'ok' };
    },
  },
  {
    name: 'method',
    weight: 3,
    apply: (rng, r) => {
      const swap = r.method === 'POST' ? 'GET' : 'POST';
      r.method = rng.chance(0.4) ? rng.pick(NON_TOKEN_METHODS) : rng.pick([...TOKEN_METHODS, swap]);
      return { want: 'reject' }; // 400 (not a token), 405 (a token the path does not take)
    },
  },
  {
    name: 'target',
    weight: 4,
    apply: (rng, r) => {
      const t = r.target;
      const path = t.split('?')[0] ?? t;
      switch (rng.int(0, 8)) {
        case 0:
          r.target = `http://127.0.0.1:8080${t}`;
          // front.ts refuses absolute-form (400) by design
          return { want: 'rfc-ok', rfc: 'an absolute-form target (RFC 9112 §3.2.2: a server MUST accept it)' };
        case 1:
          r.target = '*';
          return { want: 'reject' };
        case 2:
          r.target = rng.pick(['localhost:80', '127.0.0.1:8080', 'example.com']);
          return { want: 'reject' };
        case 3:
          r.target = rng.pick(['', '?', 'health', '.', '..']);
          return { want: 'reject' };
        case 4:
          r.target = `/${path}`;
          return { want: 'reject' }; // '//health': no such route
        case 5:
          r.target = path + rng.pick(PATH_GARBAGE);
          return { want: 'reject' };
        case 6:
          r.target = `${path}?${rng.pick(QUERY_GARBAGE)}`;
          return { want: 'ok' };
        case 7: {
          const bad = rng.pick(['\x80', '\xff', '\x01', '\x7f', '\x00', '\xc3\xa9', ' x']);
          const at = rng.int(1, t.length);
          r.target = t.slice(0, at) + bad + t.slice(at);
          return { want: 'reject' };
        }
        default:
          if (rng.chance(0.5)) {
            r.target = `/${'a'.repeat(rng.size(1000, 20000))}`;
            return { want: 'reject' };
          }
          r.target = `${path}?q=${'a'.repeat(rng.size(1000, 20000))}`;
          return { want: 'ok' };
      }
    },
  },
  {
    name: 'version',
    weight: 3,
    apply: (rng, r) => {
      const x = rng.int(0, 9);
      if (x < 4) r.version = rng.pick(VERSIONS_505);
      else if (x < 9) r.version = rng.pick(VERSIONS_400);
      else {
        r.version = 'HTTP/1.0';
        if (rng.chance(0.5)) removeHeader(r, 'host');
        return { want: 'ok' };
      }
      return { want: 'reject' };
    },
  },
  {
    name: 'host',
    weight: 3,
    apply: (rng, r) => {
      switch (rng.int(0, 3)) {
        case 0:
          removeHeader(r, 'host');
          return { want: 'reject' };
        case 1:
          r.headers.push([rng.pick(['Host', 'host']), rng.pick(['a', 'b', getHeader(r, 'host') ?? 'a'])]);
          return { want: 'reject' };
        case 2:
          setHeader(r, 'Host', '');
          return { want: 'ok' }; // RFC 9112 §3.2: an empty Host is allowed
        default:
          setHeader(r, 'Host', rng.pick(INVALID_HOSTS));
          return { want: 'reject' }; // RFC 9112 §3.2: an invalid Host value MUST get 400
      }
    },
  },
  {
    name: 'header-name',
    weight: 2,
    apply: (rng, r) => {
      r.headers.push([rng.pick(BAD_NAMES), 'v']);
      return { want: 'reject' };
    },
  },
  {
    name: 'header-line',
    weight: 2,
    apply: (rng, r) => {
      // a line without a colon, an obs-fold continuation, an empty name
      r.rawLines.push(rng.pick(['X-No-Colon value', ' folded', '\tfolded', ': no name', 'X-A', '  ']));
      return { want: 'reject' };
    },
  },
  {
    name: 'value-ctl',
    weight: 2,
    apply: (rng, r) => {
      r.headers.push(['X-Fuzz', `a${rng.pick(CTL)}b`]);
      return { want: 'reject' };
    },
  },
  {
    name: 'value-obs-text-ows',
    weight: 1,
    apply: (rng, r) => {
      if (rng.chance(0.5)) r.headers.push(['X-Latin1', rng.pick(['caf\xe9', '\xff\xfe', '\x80', 'a\xa0b'])]);
      else r.headers = r.headers.map(([n, v]) => [n, `${rng.pick(['', ' ', '\t', '  '])}${v}${rng.pick(['', ' ', '\t '])}`]);
      return { want: 'ok' };
    },
  },
  {
    name: 'expect',
    weight: 1,
    apply: (rng, r) => {
      if (rng.chance(0.5)) {
        // an empty Expect is an empty list, whose empty elements a recipient ignores (RFC 9110 §5.6.1.2)
        r.headers.push(['Expect', rng.pick(['100-continue', '100-Continue', ''])]);
        return { want: 'ok' };
      }
      r.headers.push(['Expect', rng.pick(['200-ok', 'foo', '100-continue, x'])]);
      return { want: 'reject' };
    },
  },
  {
    name: 'connection',
    weight: 1,
    apply: (rng, r) => {
      const v = rng.pick(['close', 'keep-alive, Upgrade', 'TE, close', 'Keep-Alive', 'foo']);
      setHeader(r, 'Connection', v);
      if (v.includes('Upgrade')) r.headers.push(['Upgrade', rng.pick(['websocket', 'h2c'])]);
      return { want: 'ok' };
    },
  },
  {
    name: 'leading-crlf',
    weight: 1,
    apply: (rng, r) => {
      r.leading = '\r\n'.repeat(rng.chance(0.8) ? rng.int(1, 4) : rng.int(8000, 9000));
      return { want: 'ok' };
    },
  },
];

/** Byte-level changes to a serialised head; what they make of the request is unknown. */
const BYTE_MUTATIONS: readonly [string, number][] = [
  ['flip', 4],
  ['insert', 4],
  ['delete', 2],
  ['truncate', 1],
  ['case', 1],
  ['dup-line', 2],
];
const INSERTS = [
  '\r',
  '\n',
  '\x00',
  '\x01',
  '\x1f',
  '\x7f',
  '\x80',
  '\xff',
  ' ',
  '\t',
  '\r\n',
  '\r\n ',
  '\r\n\r\n',
  ':',
  '%',
  '%00',
  '\xfe\xff',
  '\r\r\n',
  '\n\n',
];

/** Apply a byte mutation to `head`, leaving bytes before `from` alone. */
export function mutateBytes(rng: Rng, head: Buffer, from: number): { head: Buffer; name: string } {
  const name = rng.weighted(BYTE_MUTATIONS);
  const b = Buffer.from(head);
  const pos = (): number => rng.int(Math.min(from, b.length - 1), b.length - 1);
  switch (name) {
    case 'flip': {
      const n = rng.int(1, 3);
      for (let i = 0; i < n; i++) {
        const p = pos();
        b[p] = rng.chance(0.5) ? (b[p] as number) ^ (1 << rng.int(0, 7)) : rng.int(0, 255);
      }
      return { head: b, name };
    }
    case 'insert': {
      const p = pos();
      return { head: Buffer.concat([b.subarray(0, p), Buffer.from(rng.pick(INSERTS), 'latin1'), b.subarray(p)]), name };
    }
    case 'delete': {
      const p = pos();
      return { head: Buffer.concat([b.subarray(0, p), b.subarray(Math.min(b.length, p + rng.int(1, 8)))]), name };
    }
    case 'truncate':
      return { head: b.subarray(0, pos()), name };
    case 'case': {
      for (let i = from; i < b.length; i++) {
        const c = b[i] as number;
        if (((c >= 65 && c <= 90) || (c >= 97 && c <= 122)) && rng.chance(0.3)) b[i] = c ^ 32;
      }
      return { head: b, name };
    }
    default: {
      // repeat one header line
      const s = b.toString('latin1');
      const first = s.indexOf('\r\n');
      const lines = s.slice(first + 2, s.length - 4).split('\r\n');
      if (first === -1 || lines.length === 0 || lines[0] === '') return { head: b, name };
      const l = rng.pick(lines);
      return { head: Buffer.from(`${s.slice(0, s.length - 2)}${l}\r\n\r\n`, 'latin1'), name };
    }
  }
}

export function headCase(rng: Rng, ctx: GenContext): Built {
  const kind = pickDataKind(rng);
  const r = dataRequest(rng, ctx, kind);
  const labels: string[] = [kind];
  const n = rng.weighted([
    [1, 65],
    [2, 25],
    [3, 10],
  ]);
  let want: Want = 'ok';
  let rfc: string | undefined;
  let complete = true;
  let bytesMutated = false;
  const structural: HeadMutation[] = [];
  for (let i = 0; i < n; i++) {
    if (rng.chance(0.35)) bytesMutated = true;
    else structural.push(HEAD_MUTATIONS[weightedIndex(rng, HEAD_MUTATIONS)] as HeadMutation);
  }
  for (const m of structural) {
    const e = m.apply(rng, r, ctx);
    labels.push(m.name);
    want = e.want;
    rfc = e.rfc;
    if (e.complete === false) complete = false;
  }
  let head = bytesOf({ ...r, body: Buffer.alloc(0) });
  if (bytesMutated) {
    const m = mutateBytes(rng, head, 0);
    head = m.head;
    labels.push(`bytes:${m.name}`);
    complete = false;
  }
  if (n > 1 || bytesMutated) want = 'any';
  const all = Buffer.concat([head, r.body]);
  if (headOver(all, ctx.maxHeaderBytes)) {
    want = 'reject';
    complete = true;
    labels.push('over-head-limit');
  }
  const split = rng.chance(0.2);
  return {
    label: labels.join(' | '),
    target: 'data',
    pieces: split ? splitPieces(rng, all, rng.int(2, 6)) : [all],
    gapMs: split && rng.chance(0.5) ? 1 : 0,
    answers: [{ want, head: methodOf(all) === 'HEAD', ...(rfc !== undefined && (want === 'rfc-ok' || want === 'rfc-reject') ? { rfc } : {}) }],
    complete,
    end: 'wait',
    mayCloseSilently: !complete,
  };
}

export function weightedIndex(rng: Rng, xs: readonly { weight: number }[]): number {
  return rng.weighted(xs.map((x, i) => [i, x.weight] as const));
}
