// What a case's outcome must be: no 5xx for a client fault (but for the RFC's own 505 and 501),
// 2xx for valid requests, 4xx for surely invalid ones, OpenAI-style error bodies on the data
// plane, no broken framing, no connection that neither answers nor closes; and the defects known
// today, reported apart so that `npm test` stays green until they are fixed (FUZZ_STRICT=1 fails on them).
import type { FuzzCase, Want } from './cases.js';
import type { Outcome, Timing } from './client.js';
import type { Response } from './responses.js';
import { preview } from './responses.js';

/**
 * 5xx answers that are about the request, not a fault of the server (RFC 9110 §15.6), with the
 * error code the data plane gives them (front.ts). node:http (the admin API) sends neither.
 */
export const ALLOWED_5XX: readonly { status: number; code: string; why: string }[] = [
  // RFC 9110 §15.6.6: the server does not support the major version of HTTP in the request
  { status: 505, code: 'http_version_not_supported', why: 'HTTP/2.0, HTTP/1.2… in an HTTP/1.1 request line' },
  // RFC 9112 §6.1: a transfer coding the server does not understand SHOULD get 501
  { status: 501, code: 'unsupported_transfer_encoding', why: 'Transfer-Encoding other than exactly "chunked"' },
];

export interface KnownDefect {
  id: string;
  /** Where in src the fault is. */
  where: string;
  what: string;
  /** For a 5xx answer: is it this defect? */
  matches?(c: FuzzCase, r: Response): boolean;
}

/** The request target of a case's first request, as the server reads it. */
export function requestTarget(c: FuzzCase): string {
  const s = Buffer.concat(c.pieces.slice(0, 4))
    .toString('latin1', 0, 64 * 1024)
    .replace(/^(\r\n)+/, '');
  const line = s.slice(0, s.indexOf('\r\n') === -1 ? s.length : s.indexOf('\r\n'));
  return line.split(' ')[1] ?? '';
}

/**
 * Defects the fuzzer found that are not fixed yet: reported apart and not failing the run unless
 * FUZZ_STRICT=1. Empty now: the first run's three (admin API 500 on an undecodable target, admin
 * CONNECT dropped, HEAD refusals with a body) are fixed, and their cases now fail like any other.
 */
export const KNOWN_DEFECTS: readonly KnownDefect[] = [];

export interface Problem {
  text: string;
  /** A known defect's id, when this is one. */
  known?: string;
}

export interface Verdict {
  problems: Problem[];
  /** Answers the RFCs would have otherwise, harmless: counted in the summary. */
  observations: string[];
}

function errorBodyProblem(r: Response): string | undefined {
  let v: unknown;
  try {
    v = JSON.parse(r.body.toString('utf8'));
  } catch {
    return `a ${r.status} whose body is not JSON: ${preview(r.body)}`;
  }
  const e = (v as { error?: { message?: unknown; type?: unknown; code?: unknown } } | null)?.error;
  if (typeof e?.message !== 'string' || typeof e.type !== 'string' || typeof e.code !== 'string')
    return `a ${r.status} without an OpenAI-style {"error":{"message","type","code"}} body: ${preview(r.body)}`;
  return undefined;
}

function errorCode(r: Response): string | undefined {
  try {
    return (JSON.parse(r.body.toString('utf8')) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** `head`: it answers a HEAD request, so there is no body to read the code from. */
function allowed5xx(c: FuzzCase, r: Response, head: boolean): boolean {
  return ALLOWED_5XX.some((a) => a.status === r.status && (c.target === 'admin' || head || errorCode(r) === a.code));
}

function classOf(c: FuzzCase, r: Response, head: boolean): 'ok' | 'reject' | 'server' | 'other' {
  if (r.status >= 200 && r.status < 300) return 'ok';
  if (r.status >= 400 && r.status < 500) return 'reject';
  if (r.status >= 500) return allowed5xx(c, r, head) ? 'reject' : 'server';
  return 'other';
}

export function judge(c: FuzzCase, o: Outcome, t: Timing): Verdict {
  const problems: Problem[] = [];
  const observations: string[] = [];
  const what = c.label.split(' | ').slice(1).join(' | ') || c.label;
  if (o.connectError !== undefined) problems.push({ text: `could not connect: ${o.connectError}` });
  if (o.malformed !== undefined) problems.push({ text: `malformed response: ${o.malformed}` });
  o.responses.forEach((r, i) => {
    const want: Want = c.answers[i]?.want ?? 'any';
    const isHead = c.answers[i]?.head === true;
    const cls = classOf(c, r, isHead);
    const at = c.answers.length > 1 ? ` (answer ${i + 1} of ${c.answers.length})` : '';
    if (cls === 'server') {
      const known = KNOWN_DEFECTS.find((d) => d.matches?.(c, r) === true);
      problems.push({ text: `${r.status} for a client's request${at}: ${preview(r.body, 200)}`, known: known?.id });
    } else if (want === 'ok' && cls !== 'ok') problems.push({ text: `a valid request got ${r.status}${at}: ${preview(r.body, 200)}` });
    else if (want === 'reject' && cls !== 'reject') problems.push({ text: `an invalid request got ${r.status}, not a 4xx${at}` });
    else if (want === 'rfc-reject' && cls === 'ok') observations.push(`${r.status} to ${c.answers[i]?.rfc ?? what}`);
    else if (want === 'rfc-ok' && cls !== 'ok') observations.push(`${r.status} to ${c.answers[i]?.rfc ?? what}`);
    if (c.target === 'data' && r.status >= 400 && !isHead) {
      const p = errorBodyProblem(r);
      if (p !== undefined) problems.push({ text: p + at });
    }
  });
  if (o.trailing > 0) {
    const i = o.responses.length - 1;
    const last = o.responses[i];
    if (c.target === 'data' && last !== undefined && c.answers[i]?.head === true && last.status >= 400) {
      problems.push({ text: `a ${last.status} to a HEAD request, followed by ${o.trailing} bytes of body` });
    }
    // otherwise: more than the case expected (a mutation made two requests of one), not judged
  }
  const missing = c.answers.length - o.responses.length;
  const left = c.end === 'leave' || c.end === 'reset' || c.end === 'leave-on-answer';
  if (o.hung)
    problems.push({ text: `neither answered nor closed within ${t.closeMs} ms of the client's FIN (${o.responses.length}/${c.answers.length} answers)` });
  else if (missing > 0 && !left) {
    if (o.timedOut) problems.push({ text: `no answer within ${t.caseMs} ms to complete request(s) (${o.responses.length}/${c.answers.length} answers)` });
    // the data plane closes without a word only when the client has gone (or after 30 s+ timeouts):
    // a close before our FIN means its parser threw something other than a ParseError
    else if (o.closedBeforeOurFin && c.end === 'wait' && (c.target === 'data' || !c.mayCloseSilently)) {
      problems.push({
        text: `closed the connection without answering (${o.responses.length}/${c.answers.length} answers, ${o.cutShort} bytes of a cut response)`,
      });
    } else if (!o.serverClosed && !c.mayCloseSilently)
      problems.push({ text: `${o.responses.length}/${c.answers.length} answers and the connection still open` });
  }
  return { problems, observations };
}
