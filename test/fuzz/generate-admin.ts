// Admin API cases (node:http): authenticated GETs (a token is only ever sent with a GET, and a
// mutation never touches its method, so no fuzz case changes the gateway's state), unauthenticated
// changes, percent-encodings that do not decode in path parameters, odd targets, and the data
// plane's head mutations and byte mutations, whatever node:http makes of them.
import type { Rng } from './rng.js';
import { host, methodOf } from './cases.js';
import type { Built, GenContext, Want } from './cases.js';
import { HEAD_MUTATIONS, mutateBytes, weightedIndex } from './generate-head.js';
import type { HeadMutation } from './generate-head.js';
import { bytesOf, clientHeaders, json, req, withLength } from './requests.js';
import type { Req } from './requests.js';

const ADMIN_GETS = [
  '/admin/v1/status',
  '/admin/v1/workers',
  '/admin/v1/gpus',
  '/admin/v1/models/MODEL/versions',
  '/admin/v1/models/MODEL/versions/v1',
  '/admin/v1/models/MODEL/route',
  '/admin/v1/audit?limit=3',
];
const ADMIN_POSTS = ['/admin/v1/models/MODEL/rollback', '/admin/v1/models/MODEL/swap', '/admin/v1/models/MODEL/deploy', '/admin/v1/models/MODEL/versions'];
/** Percent-encodings that do not decode (or decode to nonsense) in a path parameter. */
const BAD_PERCENT = ['%', '%zz', '%E0%A4%A', '%C0%AF', '%ED%A0%80', '%FF', '%%', '%0'];

export function adminCase(rng: Rng, ctx: GenContext): Built {
  const withToken = rng.chance(0.6);
  let r: Req;
  let want: Want;
  const labels: string[] = [];
  const auth = (x: Req): void => {
    x.headers.push([rng.pick(['Authorization', 'authorization']), `Bearer ${ctx.adminToken}`]);
  };
  if (withToken || rng.chance(0.3)) {
    const p = rng.chance(0.1) ? '/admin/v1/openapi.json' : rng.pick(ADMIN_GETS).replace('MODEL', ctx.model);
    r = req('GET', p, clientHeaders(rng, host(rng), false));
    if (withToken) auth(r);
    want = withToken || p.endsWith('openapi.json') ? 'ok' : 'reject';
    labels.push(`GET ${p}${withToken ? ' (token)' : ''}`);
  } else {
    // changes are only ever sent without a token: a mutated request must not change the gateway's state
    const p = rng.pick(ADMIN_POSTS).replace('MODEL', ctx.model);
    r = withLength(
      req('POST', p, clientHeaders(rng, host(rng), true)),
      json(rng.pick([{}, { reason: 'x' }, { version: 'v1' }, { to: 'v1', mode: 'overlap' }])),
    );
    want = 'reject';
    labels.push(`POST ${p}`);
  }
  let complete = true;
  // x >= 9: sent as is
  const x = rng.int(0, 12);
  if (x < 2) {
    // a path parameter (or segment) that does not percent-decode: a client fault (400), never a 500
    const segs = r.target.split('/');
    const at = rng.int(3, Math.max(3, segs.length - 1));
    segs[at] = `${segs[at] ?? ''}${rng.pick(BAD_PERCENT)}`;
    r.target = segs.join('/');
    want = r.target.includes('/models/') ? 'reject' : want === 'ok' ? 'any' : want;
    labels.push('bad-percent');
  } else if (x < 3) {
    r.target = rng.pick(['//', '//[', `//${r.target}`, 'http://x:99999/admin/v1/status', 'http://[::1/admin/v1/status', '/\\x', `http://127.0.0.1${r.target}`]);
    want = 'any';
    labels.push('odd-target');
  } else if (x < 7) {
    // the data plane's head mutations, whatever node:http makes of them (not the method, with a token)
    const candidates = HEAD_MUTATIONS.filter((m) => !(withToken && m.name === 'method'));
    const m = candidates[weightedIndex(rng, candidates)] as HeadMutation;
    if (m.apply(rng, r, ctx).complete === false) complete = false;
    want = 'any';
    labels.push(m.name);
  } else if (x < 9) {
    const h = bytesOf({ ...r, body: Buffer.alloc(0) });
    // with a token, never touch the method: a flipped GET must not become a change
    const m = mutateBytes(rng, h, withToken ? h.indexOf(32) + 1 : 0);
    labels.push(`bytes:${m.name}`);
    const all = Buffer.concat([m.head, r.body]);
    return {
      label: labels.join(' | '),
      target: 'admin',
      pieces: [all],
      gapMs: 0,
      answers: [{ want: 'any', head: methodOf(all) === 'HEAD' }],
      complete: false,
      end: 'wait',
      mayCloseSilently: true,
    };
  }
  const all = bytesOf(r);
  return {
    label: labels.join(' | '),
    target: 'admin',
    pieces: [all],
    gapMs: 0,
    answers: [{ want, head: methodOf(all) === 'HEAD' }],
    complete,
    end: 'wait',
    mayCloseSilently: !complete,
  };
}
