// Connection-behaviour cases: pipelined requests (valid, then one refused), a head repeated with
// only Content-Length changed (front.ts's LastRequestHead path), half-closes, silence, garbage and
// other protocols' prefaces, a slow trickle, clients that leave mid-head, mid-body or mid-answer;
// and the memory-pressure cases for the defects being fixed in parallel (a non-reading pipeliner,
// 1-byte chunks, a slow reader), sized by the profile's Scale.
import type { Rng } from './rng.js';
import { dataRequest, host, methodOf, pickDataKind, splitPieces } from './cases.js';
import type { Answer, Built, GenContext, Want } from './cases.js';
import { bytesOf, chatObject, chunkBody, clientHeaders, headOf, json, req, setHeader, withChunked, withLength } from './requests.js';

/** Complete requests the data plane refuses; `closes`: a parse error (answered, then the connection closes). */
const REFUSED: { bytes: string; closes: boolean }[] = [
  { bytes: 'GET /health HTTP/2.0\r\nHost: a\r\n\r\n', closes: true },
  { bytes: 'GET /health HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n', closes: true },
  { bytes: 'GET /health HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n', closes: true },
  { bytes: 'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', closes: true },
  { bytes: 'GET /health HTTP/1.1\r\n\r\n', closes: true },
  { bytes: 'GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', closes: true },
  { bytes: `GET /${'x'.repeat(17000)} HTTP/1.1\r\nHost: a\r\n\r\n`, closes: true },
  { bytes: 'GET /nope HTTP/1.1\r\nHost: a\r\n\r\n', closes: false },
  { bytes: 'DELETE /health HTTP/1.1\r\nHost: a\r\n\r\n', closes: false },
  { bytes: 'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n{', closes: false },
  { bytes: 'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}', closes: false },
];

const PREFACES = [
  // a TLS ClientHello's first bytes
  Buffer.from('16030100a5010000a10303', 'hex'),
  // HTTP/2's preface but for its last bytes: HTTP/1.1 after all (the whole preface is HTTP/2 on the data plane, tested in
  // test/integration/gateway/http2*.test.ts, not garbage)
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\x00', 'latin1'),
  Buffer.from('SSH-2.0-OpenSSH_9.6\r\n', 'latin1'),
  Buffer.from('GET /', 'latin1'),
  Buffer.from('\r\n'.repeat(10), 'latin1'),
  Buffer.from('\x00\x00\x00\x00', 'latin1'),
];

/** `body` in 1-byte chunks, encoded directly (a Chunk object per byte would cost the test process more than the server). */
function oneByteChunked(body: Buffer): Buffer {
  const out = Buffer.alloc(body.length * 6 + 5);
  let o = 0;
  for (let i = 0; i < body.length; i++) {
    out[o++] = 0x31;
    out[o++] = 13;
    out[o++] = 10;
    out[o++] = body[i] as number;
    out[o++] = 13;
    out[o++] = 10;
  }
  out.write('0\r\n\r\n', o, 'latin1');
  return out;
}

function answersFor(bufs: Buffer[], want: Want): Answer[] {
  return bufs.map((b) => ({ want, head: methodOf(b) === 'HEAD' }));
}

export function connCase(rng: Rng, ctx: GenContext): Built {
  const pw = ctx.scale.pressureWeight;
  const m = rng.weighted<string>([
    ['pipeline', 5],
    ['pipeline-then-refused', 3],
    ['same-head', 3],
    ['half-close-after-head', 1],
    ['half-close-complete', 1],
    ['silent', 1],
    ['garbage', 2],
    ['trickle', 2],
    ['leave-mid-head', 1],
    ['leave-mid-body', 1],
    ['reset-mid-body', 1],
    ['leave-mid-answer', 1],
    ['leave-after-request', 1],
    ['flood-no-read', pw],
    ['one-byte-chunks', pw],
    ['slow-reader', pw],
  ]);
  const base: Omit<Built, 'label' | 'pieces' | 'answers'> = { target: 'data', gapMs: 0, complete: true, end: 'wait', mayCloseSilently: false };
  const valid = (): Buffer => {
    const r = dataRequest(rng, ctx, pickDataKind(rng));
    if (r.method === 'POST' && rng.chance(0.2)) withChunked(r, chunkBody(rng, r.body, 'random'));
    return bytesOf(r);
  };
  switch (m) {
    case 'pipeline': {
      const reqs = Array.from({ length: rng.int(2, 8) }, valid);
      const all = Buffer.concat(reqs);
      const split = rng.chance(0.5);
      return {
        ...base,
        label: `pipeline ×${reqs.length}`,
        pieces: split ? splitPieces(rng, all, rng.int(2, 6)) : [all],
        gapMs: split && rng.chance(0.5) ? 1 : 0,
        answers: answersFor(reqs, 'ok'),
      };
    }
    case 'pipeline-then-refused': {
      const reqs = Array.from({ length: rng.int(1, 5) }, valid);
      const bad = rng.pick(REFUSED);
      const after = valid();
      const answers = [...answersFor(reqs, 'ok'), { want: 'reject' as const, head: false }, ...(bad.closes ? [] : answersFor([after], 'ok'))];
      return {
        ...base,
        label: `pipeline ×${reqs.length} then ${JSON.stringify(bad.bytes.slice(0, 40))}`,
        pieces: [Buffer.concat([...reqs, Buffer.from(bad.bytes, 'latin1'), after])],
        answers,
      };
    }
    case 'same-head': {
      // one head, Content-Length's digits changed at most: the server reuses its parse of it
      const headers: [string, string][] = [
        ['Host', host(rng)],
        ['Content-Type', 'application/json'],
        ['Content-Length', '0'],
        ['X-Session-Id', `s${rng.int(1, 9)}`],
      ];
      const pieces: Buffer[] = [];
      const answers: Answer[] = [];
      const n = rng.int(2, 5);
      const labels: string[] = [];
      for (let i = 0; i < n; i++) {
        const body = json(chatObject(rng, ctx.model));
        const r = withLength(
          req(
            'POST',
            '/v1/chat/completions',
            headers.map(([a, b]) => [a, b]),
          ),
          body,
        );
        let want: Want = 'ok';
        let rfc: string | undefined;
        if (i === n - 1 && rng.chance(0.6)) {
          const d = String(body.length);
          const [v, w] = rng.pick<[string, Want]>([
            [` ${d}`, 'ok'],
            [`${d} `, 'ok'],
            [`${d}, ${d}`, 'ok'],
            [`0${d}`, 'ok'],
            [d.padStart(15, '0'), 'ok'],
            // RFC 9110 §8.6: any number of digits; front.ts refuses more than 15 (413)
            [d.padStart(16, '0'), 'rfc-ok'],
            [`+${d}`, 'reject'],
            ['', 'reject'],
            [`${d},${Number(d) + 1}`, 'reject'],
            [`${d}.0`, 'reject'],
            [`-${d}`, 'reject'],
            [`${d}x`, 'reject'],
          ]);
          setHeader(r, 'Content-Length', v);
          want = w;
          if (w === 'rfc-ok') rfc = 'a Content-Length of 16 or more digits, leading zeros (RFC 9110 §8.6: 1*DIGIT)';
          labels.push(`last CL ${JSON.stringify(v)}`);
        }
        pieces.push(bytesOf(r));
        answers.push({ want, head: false, ...(rfc === undefined ? {} : { rfc }) });
      }
      const all = Buffer.concat(pieces);
      return { ...base, label: ['same head', `×${n}`, ...labels].join(' | '), pieces: rng.chance(0.5) ? splitPieces(rng, all, rng.int(2, 5)) : [all], answers };
    }
    case 'half-close-after-head': {
      const r = withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(chatObject(rng, ctx.model)));
      const partial = rng.chance(0.5) ? r.body.subarray(0, rng.int(1, r.body.length - 1)) : Buffer.alloc(0);
      return {
        ...base,
        label: `half-close after the head${partial.length > 0 ? ' and part of the body' : ''}`,
        pieces: [Buffer.concat([headOf(r), partial])],
        answers: [],
        complete: false,
        end: 'half-close',
        mayCloseSilently: true,
      };
    }
    case 'half-close-complete': {
      const b = valid();
      // answered or abandoned (a FIN is the client leaving), but closed either way
      return { ...base, label: `half-close after ${methodOf(b)}`, pieces: [b], answers: answersFor([b], 'ok'), end: 'half-close', mayCloseSilently: true };
    }
    case 'silent':
      return { ...base, label: 'connect, send nothing, half-close', pieces: [], answers: [], complete: false, end: 'half-close', mayCloseSilently: true };
    case 'garbage': {
      const bytes = rng.chance(0.5) ? rng.pick(PREFACES) : Buffer.from(Array.from({ length: rng.int(1, 300) }, () => rng.int(0, 255)));
      return {
        ...base,
        label: `garbage ${bytes.subarray(0, 8).toString('hex')}`,
        pieces: [bytes],
        answers: [{ want: 'any', head: false }],
        complete: false,
        end: rng.chance(0.5) ? 'half-close' : 'wait',
        mayCloseSilently: true,
      };
    }
    case 'trickle': {
      const b = valid();
      const size = Math.max(rng.int(1, 16), Math.ceil(b.length / 150));
      const pieces: Buffer[] = [];
      for (let i = 0; i < b.length; i += size) pieces.push(b.subarray(i, i + size));
      return { ...base, label: `trickle ${methodOf(b)} in ${pieces.length} pieces`, pieces, gapMs: 1, answers: answersFor([b], 'ok') };
    }
    case 'leave-mid-head': {
      const b = valid();
      return {
        ...base,
        label: 'leave mid-head',
        pieces: [b.subarray(0, rng.int(1, Math.max(1, b.indexOf('\r\n\r\n'))))],
        answers: [],
        complete: false,
        end: 'leave',
        mayCloseSilently: true,
      };
    }
    case 'leave-mid-body':
    case 'reset-mid-body': {
      const r = withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(chatObject(rng, ctx.model)));
      if (rng.chance(0.3)) withChunked(r, chunkBody(rng, r.body, 'tiny'));
      return {
        ...base,
        label: m,
        pieces: [Buffer.concat([headOf(r), r.body.subarray(0, rng.int(0, r.body.length - 1))])],
        answers: [],
        complete: false,
        end: m === 'reset-mid-body' ? 'reset' : 'leave',
        mayCloseSilently: true,
      };
    }
    case 'leave-mid-answer': {
      const o = chatObject(rng, ctx.model, true);
      o.max_tokens = rng.int(16, 64);
      const r = withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(o));
      return { ...base, label: 'leave mid-answer (stream)', pieces: [bytesOf(r)], answers: [], end: 'leave-on-answer', mayCloseSilently: true };
    }
    case 'leave-after-request': {
      const b = valid();
      return { ...base, label: `leave right after ${methodOf(b)}`, pieces: [b], answers: [], end: rng.chance(0.3) ? 'reset' : 'leave', mayCloseSilently: true };
    }
    case 'flood-no-read': {
      const n = ctx.scale.pipelineFlood;
      const path = rng.pick(['/metrics', '/v1/models', '/health']);
      const one = Buffer.from(`GET ${path} HTTP/1.1\r\nHost: a\r\n\r\n`, 'latin1');
      return {
        ...base,
        label: `flood: ${n} pipelined GET ${path}, never read`,
        pieces: [Buffer.concat(Array.from({ length: n }, () => one))],
        answers: [],
        end: 'leave',
        mayCloseSilently: true,
        noReadMs: ctx.scale.holdMs,
        pressure: 'pipelined requests from a non-reading client',
      };
    }
    case 'one-byte-chunks': {
      const n = ctx.scale.oneByteChunked;
      const o = chatObject(rng, ctx.model);
      o.messages = [{ role: 'user', content: 'lorem ipsum '.repeat(Math.ceil(n / 12)).slice(0, Math.max(1, n - 120)) }];
      const body = json(o);
      const r = req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true));
      setHeader(r, 'Transfer-Encoding', 'chunked');
      return {
        ...base,
        label: `${body.length} body bytes in 1-byte chunks`,
        pieces: [headOf(r), oneByteChunked(body)],
        // a long prompt may be over the worker's context (its 400 is fine)
        answers: [{ want: body.length <= 16 * 1024 ? 'ok' : 'any', head: false }],
        pressure: '1-byte chunks',
      };
    }
    default: {
      const o = chatObject(rng, ctx.model, true);
      const tokens = ctx.scale.slowReaderTokens;
      o.max_tokens = tokens;
      const r = withLength(req('POST', '/v1/chat/completions', clientHeaders(rng, host(rng), true)), json(o));
      return {
        ...base,
        label: `slow reader: a ${tokens}-token stream, never read`,
        pieces: [bytesOf(r)],
        answers: [],
        end: 'leave',
        mayCloseSilently: true,
        noReadMs: ctx.scale.holdMs,
        pressure: 'slow reader',
      };
    }
  }
}
