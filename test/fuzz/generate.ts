// The hostile-clients fuzz cases (issue 12): request heads, chunked bodies, JSON bodies, connection
// behaviours and the admin API, generated from valid requests and mutated. Case i of seed s is
// built from (s, i) alone, so a failure is replayed with FUZZ_SEED=s FUZZ_CASE=i. Each case says
// what the server must answer: the mutations that are surely wrong or surely harmless say so, and
// a case mutated in several ways (or byte by byte) may only be answered without a 5xx of the
// server's own making.
import { caseSeed, Rng } from './rng.js';
import type { Built, Family, FuzzCase, GenContext } from './cases.js';
import { chunkedCase } from './generate-chunked.js';
import { jsonCase } from './generate-json.js';
import { connCase } from './generate-conn.js';
import { adminCase } from './generate-admin.js';
import { headCase } from './generate-head.js';

export function generate(seed: number, index: number, ctx: GenContext): FuzzCase {
  const rng = new Rng(caseSeed(seed, index));
  const family = rng.weighted<Family>([
    ['head', 30],
    ['chunked', 18],
    ['json', 25],
    ['conn', 17],
    ['admin', 10],
  ]);
  let b: Built;
  switch (family) {
    case 'head':
      b = headCase(rng, ctx);
      break;
    case 'chunked':
      b = chunkedCase(rng, ctx);
      break;
    case 'json':
      b = jsonCase(rng, ctx);
      break;
    case 'conn':
      b = connCase(rng, ctx);
      break;
    default:
      b = adminCase(rng, ctx);
  }
  return { seed, index, family, ...b };
}
