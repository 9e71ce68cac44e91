// Differential test of the HTTP/1 core: thousands of generated and mutated request heads and chunked
// bodies, read by the gateway's pure parser and by Node's own (llhttp, through node:http). They must
// agree on accept / reject / incomplete and, when both accept, on method, target, header fields and
// the decoded body. Where Glidepath differs on purpose, the difference is one entry of DEVIATIONS
// (with its RFC and reason; docs/gateway.md lists the same); any other disagreement fails and prints
// the input shrunk to the bytes that still disagree, and an entry that never applies fails too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeOracle, ours } from '../../helpers/llhttp-oracle.js';
import type { Reading } from '../../helpers/llhttp-oracle.js';
import { Rng } from '../../fuzz/rng.js';

const SEED = 0x9112;
const GENERATED = 1500;
const MUTATED = 1500;

// ---- cases ------------------------------------------------------------------------------------------

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'];
const TARGETS = ['/', '/v1/chat/completions', '/v1/models?x=1&y=%20', '/a/b/../c', '/%7euser', '/p;q?r#f'];

interface Field {
  name: string;
  value: string;
}

function valid(rng: Rng): { line: string; fields: Field[]; body: string } {
  const method = rng.pick(METHODS);
  const fields: Field[] = [{ name: 'Host', value: rng.pick(['127.0.0.1:8080', 'example.com', 'gw.internal', '[::1]:80']) }];
  if (rng.chance(0.5)) fields.push({ name: 'User-Agent', value: rng.pick(['openai-node/4', 'curl/8.5', 'x']) });
  if (rng.chance(0.3)) fields.push({ name: 'Accept', value: 'application/json, text/event-stream' });
  let body = '';
  if (method === 'POST' || method === 'PUT' || method === 'PATCH' || rng.chance(0.1)) {
    body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(rng.int(0, 40)) }] });
    fields.push({ name: 'Content-Type', value: 'application/json' });
    if (rng.chance(0.3))
      return {
        line: `${method} ${rng.pick(TARGETS)} HTTP/1.1`,
        fields: [...fields, { name: 'Transfer-Encoding', value: 'chunked' }],
        body: chunked(rng, body),
      };
    fields.push({ name: 'Content-Length', value: String(Buffer.byteLength(body, 'latin1')) });
  }
  return { line: `${method} ${rng.pick(TARGETS)} HTTP/1.1`, fields, body };
}

function chunked(rng: Rng, body: string): string {
  let out = '';
  let i = 0;
  while (i < body.length) {
    const n = Math.min(body.length - i, rng.int(1, 24));
    out += `${n.toString(16)}\r\n${body.slice(i, i + n)}\r\n`;
    i += n;
  }
  return `${out}0\r\n\r\n`;
}

const bytes = (line: string, fields: readonly Field[], body: string): Buffer =>
  Buffer.from(`${line}\r\n${fields.map((f) => `${f.name}: ${f.value}\r\n`).join('')}\r\n${body}`, 'latin1');

/** Structural mutations whose interesting region is known: one at a time on a valid request. */
const STRUCTURAL: readonly ((rng: Rng, r: { line: string; fields: Field[]; body: string }) => void)[] = [
  (rng, r) => (r.line = r.line.replace(/^\S+/, rng.pick(['GE T', 'G\x00T', 'get', 'FOO', 'PRI', 'CONNECT', 'TRACE', 'M-SEARCH', 'PROPFIND', 'G(T', '']))),
  (rng, r) =>
    (r.line = r.line.replace(
      / \S+ /,
      ` ${rng.pick(['http://a/b', '*', 'a/b', '/a b', '/\x7f', '/\xe9', '//x', '/a\tb', '/' + 'a'.repeat(200), '/?' + '%'.repeat(3)])} `,
    )),
  (rng, r) =>
    (r.line = r.line.replace(
      /HTTP\/1\.1$/,
      rng.pick(['HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'http/1.1', 'HTTP/1.1 ', 'HTTP/11', 'HTTP/1', 'HTTPS/1.1', 'HTTP/0.9']),
    )),
  (rng, r) => r.fields.push({ name: rng.pick(['X Y', 'X:Y', '', 'X\x00', 'Ä', 'X-Ok', 'x_y', '(x)']), value: 'v' }),
  (rng, r) => r.fields.push({ name: 'X-V', value: rng.pick(['a\x00b', 'a\x7fb', '\xe9t\xe9', ' padded ', 'a\tb', '"q"', 'a\x01', '']) }),
  (rng, r) => (r.fields = r.fields.filter((f) => f.name !== 'Host')),
  (rng, r) => r.fields.push({ name: 'Host', value: rng.pick(['a', 'b.example', 'a b', 'a/b', 'x:99999', '[::1', 'a@b', '']) }),
  (rng, r) => {
    const h = r.fields.find((f) => f.name === 'Host');
    if (h) h.value = rng.pick(['a b', 'a/b', 'x:port', '[::1', 'a@b', 'a,b', '', 'ok.example:8080', '\xe9.example']);
  },
  (rng, r) => {
    const cl = r.fields.find((f) => f.name === 'Content-Length');
    if (cl) cl.value = rng.pick(['+5', '-1', '0x10', ' 5', '5 5', '05', '1e3', '', '99999999999999999999', cl.value + ', ' + cl.value, cl.value + ',' + '7']);
    else r.fields.push({ name: 'Content-Length', value: rng.pick(['0', '3', 'abc']) });
  },
  (rng, r) => r.fields.push({ name: 'Content-Length', value: rng.pick(['0', '1', '2']) }),
  (rng, r) =>
    r.fields.push({
      name: 'Transfer-Encoding',
      value: rng.pick(['chunked', 'gzip, chunked', 'chunked, gzip', 'identity', 'CHUNKED', ' chunked', 'chunked ', 'x-chunked', 'gzip']),
    }),
  (rng, r) => {
    const te = r.fields.find((f) => f.name === 'Transfer-Encoding');
    if (te) te.name = rng.pick(['transfer-encoding', 'Transfer-Encoding ', 'Transfer_Encoding', ' Transfer-Encoding', 'TRANSFER-ENCODING']);
  },
  (rng, r) => r.fields.push({ name: 'Expect', value: rng.pick(['100-continue', '100-Continue', '200-ok', 'foo']) }),
  (rng, r) => r.fields.push({ name: 'Connection', value: rng.pick(['close', 'keep-alive', 'Upgrade', 'close, x']) }),
  (rng, r) => {
    if (!r.body.endsWith('0\r\n\r\n')) return;
    r.body = r.body.replace(/^[0-9a-f]+/, (m) =>
      rng.pick([m.toUpperCase(), `0${m}`, `${m};ext=1`, `${m};e="q q"`, `${m} `, `-${m}`, `${m}g`, `${m}\n`, 'ffffffffffffffffff']),
    );
  },
  (rng, r) => {
    if (!r.body.endsWith('0\r\n\r\n')) return;
    r.body = rng.pick([
      r.body.replace(/0\r\n\r\n$/, '0\r\nX-Trailer: 1\r\n\r\n'),
      r.body.replace(/\r\n0\r\n\r\n$/, '0\r\n\r\n'),
      r.body.replace(/\r\n/, '\n'),
      r.body.slice(0, -2),
      r.body + 'GET / HTTP/1.1\r\n',
    ]);
  },
  (rng, r) => {
    if (r.fields.length > 0) r.fields = [{ name: ` ${r.fields[0]!.name}`, value: r.fields[0]!.value }, ...r.fields.slice(1)];
  },
  (rng, r) => r.fields.push({ name: 'X-Long', value: 'v'.repeat(rng.pick([100, 4000, 20_000])) }),
];

/** Byte-level mutations: flips, insertions of CR, LF, NUL, SP, HT, deletions, truncations. */
function mutate(rng: Rng, b: Buffer): Buffer {
  const out = [...b];
  const n = rng.int(1, 3);
  for (let k = 0; k < n && out.length > 0; k++) {
    const i = rng.int(0, out.length - 1);
    switch (rng.int(0, 4)) {
      case 0:
        out[i] = rng.pick([0x0d, 0x0a, 0x00, 0x20, 0x09, 0x3a, 0x7f, 0xff, rng.int(0, 255)]);
        break;
      case 1:
        out.splice(i, 0, rng.pick([0x0d, 0x0a, 0x00, 0x20, 0x09, 0x3a]));
        break;
      case 2:
        out.splice(i, 1);
        break;
      case 3:
        out.splice(i, 2, 0x0a);
        break;
      default:
        out.length = i;
    }
  }
  return Buffer.from(out);
}

/** RFC 9112 §6–§11 request smuggling shapes (CL.TE, TE.CL, TE.TE, bad lengths, bare LF in chunked). */
const SMUGGLING: readonly string[] = [
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n',
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd',
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc',
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3 3\r\n\r\nabc',
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x3\r\n\r\nabc',
  'POST / HTTP/1.1\nHost: a\nContent-Length: 3\n\nabc',
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 3\r\n\r\nabc',
  'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n',
  'GET / HTTP/1.1\r\n\r\n',
  'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
];

// ---- where Glidepath differs on purpose -------------------------------------------------------------

interface Deviation {
  name: string;
  rfc: string;
  why: string;
  /** Does this deviation explain the disagreement on this input? */
  applies(input: string, mine: Reading, node: Reading): boolean;
}

const requestLine = (s: string): string => s.slice(0, s.search(/\r?\n|$/));
const field = (s: string, name: string): string[] =>
  [...s.slice(0, s.indexOf('\r\n\r\n') >>> 0).matchAll(new RegExp(`^${name}[ \\t]*:(.*)$`, 'gim'))].map((m) => m[1]!.replace(/\r$/, '').trim());

export const DEVIATIONS: readonly Deviation[] = [
  {
    name: 'a head is judged once it is whole',
    rfc: 'RFC 9112 §2.2 (parsing a message once its header section is received)',
    why: 'llhttp refuses a bad byte as it arrives; the gateway parses a head when its blank line arrives (or it passes max_header_bytes, or a bare LF/CR shows): a head still arriving is refused then, or at the request timeout (408)',
    applies: (s, mine, node) => mine.kind === 'incomplete' && node.kind === 'reject',
  },
  {
    name: 'bare LF refused',
    rfc: 'RFC 9112 §2.2 (a recipient MAY accept a bare LF; §11.1: lenient line parsing is how requests are smuggled)',
    why: 'the gateway refuses a head with a bare LF or CR as soon as it sees one; llhttp waits for more, or reads `METHOD /` + LF as a request',
    applies: (s, mine) => mine.kind === 'reject' && /(^|[^\r])\n/.test(s.slice(0, s.indexOf('\r\n\r\n') >>> 0)),
  },
  {
    name: 'HTTP/1.0 and HTTP/1.1 only',
    rfc: 'RFC 9112 §2.3 (every request line has HTTP-version); RFC 9110 §15.6.6 (505 for a version the server does not support)',
    why: 'llhttp reads `GET /` (no version) as HTTP/0.9 and `HTTP/2.0` or `HTTP/0.9` request lines as requests; the gateway answers 505, or 400 without a version',
    applies: (s, mine, node) =>
      mine.kind === 'reject' && node.kind !== 'reject' && (mine.why === 'http_version_not_supported' || !/ HTTP\//.test(requestLine(s))),
  },
  {
    name: 'expectations other than 100-continue',
    rfc: 'RFC 9110 §10.1.1 (a server MAY answer 417 to an expectation it does not meet)',
    why: 'node meets any Expect that mentions 100-continue; the gateway answers 417 when any member is something else',
    applies: (s, mine, node) => mine.kind === 'reject' && mine.why === 'expectation_failed' && node.kind !== 'reject',
  },
  {
    name: "one SP between the request line's parts",
    rfc: 'RFC 9112 §3 (single SP; a recipient MAY split on any whitespace)',
    why: 'llhttp accepts several spaces between target and version; the gateway keeps to the grammar (400)',
    applies: (s, mine, node) => mine.kind === 'reject' && node.kind !== 'reject' && /\S {2,}\S/.test(requestLine(s)),
  },
  {
    name: 'CONNECT is no tunnel',
    rfc: 'RFC 9110 §9.3.6 (CONNECT asks a proxy for a tunnel)',
    why: "node hands CONNECT to a 'connect' listener (none here: it closes); the gateway reads it as any request (origin-form) or refuses its authority-form target",
    applies: (s, mine, node) => s.startsWith('CONNECT ') && node.kind !== 'request',
  },
  {
    name: 'a Content-Length list of equal values',
    rfc: 'RFC 9110 §8.6 (a recipient MAY take "42, 42" as 42, or refuse it)',
    why: 'the gateway takes one value for a list of identical ones (it re-frames the body to the worker itself); llhttp refuses the list',
    applies: (s, mine, node) =>
      mine.kind === 'request' && node.kind === 'reject' && node.why === 'HPE_INVALID_CONTENT_LENGTH' && field(s, 'content-length').some((v) => v.includes(',')),
  },
  {
    name: 'Transfer-Encoding in HTTP/1.0',
    rfc: 'RFC 9112 §6.1 (an HTTP/1.0 message with Transfer-Encoding MUST be treated as having faulty framing)',
    why: 'llhttp decodes the chunked body of an HTTP/1.0 request; the gateway refuses it (400)',
    applies: (s, mine, node) => mine.kind === 'reject' && mine.why === 'invalid_transfer_encoding' && node.kind === 'request' && / HTTP\/1\.0\r?\n/.test(s),
  },
  {
    name: 'methods: any token',
    rfc: 'RFC 9110 §9.1 (methods are extensible tokens)',
    why: 'llhttp knows a fixed list of methods; the gateway accepts any token and lets the route decide (405/404)',
    applies: (s, mine, node) =>
      mine.kind === 'request' && node.kind === 'reject' && !/^(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE) /.test(requestLine(s)),
  },
  {
    name: 'request target: origin-form only',
    rfc: 'RFC 9112 §3.2 (absolute-form is for proxies; asterisk-form only for OPTIONS)',
    why: 'the gateway is no forward proxy: absolute-form, authority-form and asterisk-form targets get 400',
    applies: (s, mine, node) => mine.kind === 'reject' && node.kind !== 'reject' && !/^\S+ \//.test(requestLine(s)),
  },
  {
    name: 'Host value syntax',
    rfc: 'RFC 9112 §3.2 (a Host that is not uri-host[:port] is a 400)',
    why: 'llhttp only checks that there is a Host; the gateway checks its value',
    applies: (s, mine, node) => mine.kind === 'reject' && mine.why === 'invalid_host' && node.kind !== 'reject',
  },
  {
    name: 'transfer codings other than chunked',
    rfc: 'RFC 9112 §6.1 (a server that does not understand a coding answers 501)',
    why: 'the gateway accepts exactly `Transfer-Encoding: chunked` and answers 501 to anything else (gzip, chunked; an empty list element); llhttp decodes the chunked and passes the rest on',
    applies: (s, mine, node) => mine.kind === 'reject' && mine.why === 'unsupported_transfer_encoding' && node.kind !== 'reject',
  },
];

/** One input per deviation, on which the two readers really disagree and that deviation is why. */
const EXAMPLES: Readonly<Record<string, string>> = {
  'a head is judged once it is whole': 'G(T / HTTP/1.1\r\nHost: a\r\n',
  'bare LF refused': 'OPTIONS /\n\r\n',
  'Transfer-Encoding in HTTP/1.0': 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
  'methods: any token': 'FOO / HTTP/1.1\r\nHost: a\r\n\r\n',
  'request target: origin-form only': 'GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n',
  'Host value syntax': 'GET / HTTP/1.1\r\nHost: a b\r\n\r\n',
  'transfer codings other than chunked': 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n',
  'HTTP/1.0 and HTTP/1.1 only': 'GET / HTTP/2.0\r\nHost: a\r\n\r\n',
  'expectations other than 100-continue': 'GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, x\r\n\r\n',
  "one SP between the request line's parts": 'GET /  HTTP/1.1\r\nHost: a\r\n\r\n',
  'CONNECT is no tunnel': 'CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n',
  'a Content-Length list of equal values': 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3,3\r\n\r\nabc',
};

// ---- the comparison ---------------------------------------------------------------------------------

function agree(a: Reading, b: Reading): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind !== 'request' || b.kind !== 'request') return true;
  return a.method === b.method && a.url === b.url && a.body === b.body && JSON.stringify(sorted(a.headers)) === JSON.stringify(sorted(b.headers));
}
const sorted = (h: Record<string, string>): [string, string][] => Object.entries(h).sort(([x], [y]) => (x < y ? -1 : 1));

describe('HTTP/1 core against llhttp (node:http)', () => {
  const oracle = new NodeOracle();
  beforeAll(() => oracle.start());
  afterAll(() => oracle.stop());

  async function judge(input: Buffer): Promise<{ ok: boolean; deviation?: Deviation; mine: Reading; node: Reading }> {
    const mine = ours(input);
    const node = await oracle.read(input);
    if (agree(mine, node)) return { ok: true, mine, node };
    const s = input.toString('latin1');
    const deviation = DEVIATIONS.find((d) => d.applies(s, mine, node));
    return deviation ? { ok: true, deviation, mine, node } : { ok: false, mine, node };
  }

  /** The smallest input (deleting bytes) on which the two still disagree without a listed reason. */
  async function shrink(input: Buffer): Promise<Buffer> {
    let cur = input;
    for (let changed = true; changed;) {
      changed = false;
      for (let size = Math.max(1, cur.length >> 1); size >= 1; size >>= 1) {
        for (let i = 0; i + size <= cur.length; i += size) {
          const next = Buffer.concat([cur.subarray(0, i), cur.subarray(i + size)]);
          if (!(await judge(next)).ok) {
            cur = next;
            changed = true;
            break;
          }
        }
        if (changed) break;
      }
    }
    return cur;
  }

  it('every listed deviation has an example on which the readers disagree for that reason', async () => {
    expect(Object.keys(EXAMPLES).sort()).toEqual(DEVIATIONS.map((d) => d.name).sort());
    for (const [name, input] of Object.entries(EXAMPLES)) {
      const r = await judge(Buffer.from(input, 'latin1'));
      expect(agree(r.mine, r.node), `${name}: the readers agree, so the deviation is not needed here`).toBe(false);
      expect(r.deviation?.name, `${name}: ours ${JSON.stringify(r.mine)}, node ${JSON.stringify(r.node)}`).toBe(name);
    }
  });

  const usedBySmuggling = new Set<string>();
  it('agrees on the smuggling shapes of RFC 9112, and refuses each', async () => {
    for (const s of SMUGGLING) {
      const input = Buffer.from(s, 'latin1');
      const r = await judge(input);
      expect(r.ok, `${JSON.stringify(s)}: ours ${JSON.stringify(r.mine)}, node ${JSON.stringify(r.node)}`).toBe(true);
      // a smuggling shape is never read as a request by the gateway, whatever llhttp does
      expect(r.mine.kind, JSON.stringify(s)).not.toBe('request');
      if (r.deviation) usedBySmuggling.add(r.deviation.name);
    }
  });

  it(`agrees on ${GENERATED} generated and ${MUTATED} mutated requests, but for the listed deviations`, async () => {
    const rng = new Rng(SEED);
    const inputs: Buffer[] = [];
    for (let i = 0; i < GENERATED; i++) {
      const r = valid(rng);
      const k = rng.int(0, 2);
      for (let j = 0; j < k; j++) rng.pick(STRUCTURAL)(rng, r);
      inputs.push(bytes(r.line, r.fields, r.body));
    }
    for (let i = 0; i < MUTATED; i++) {
      const r = valid(rng);
      inputs.push(mutate(rng, bytes(r.line, r.fields, r.body)));
    }
    const used = new Map<string, number>();
    const tally = { request: 0, reject: 0, incomplete: 0 };
    const failures: string[] = [];
    const CONCURRENCY = 16;
    for (let i = 0; i < inputs.length; i += CONCURRENCY) {
      const batch = inputs.slice(i, i + CONCURRENCY);
      const results = await Promise.all(batch.map((b) => judge(b)));
      for (const [k, r] of results.entries()) {
        tally[r.node.kind]++;
        if (r.deviation) used.set(r.deviation.name, (used.get(r.deviation.name) ?? 0) + 1);
        if (!r.ok && failures.length < 5) {
          const small = await shrink(batch[k]!);
          const again = await judge(small);
          failures.push(`${JSON.stringify(small.toString('latin1'))}\n    ours ${JSON.stringify(again.mine)}\n    node ${JSON.stringify(again.node)}`);
        }
      }
    }
    console.log(JSON.stringify({ cases: inputs.length, node: tally, deviations: Object.fromEntries(used) }));
    expect(failures, `disagreements (shrunk):\n${failures.join('\n')}`).toEqual([]);
    // the generator reaches every kind of outcome, and the common deviations happen in a run (each has its example above)
    expect(Math.min(tally.request, tally.reject, tally.incomplete)).toBeGreaterThan(50);
    expect(used.size + usedBySmuggling.size).toBeGreaterThanOrEqual(DEVIATIONS.length - 2);
  });
});
