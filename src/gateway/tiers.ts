// A request's priority tier: from its API key (a table of key hashes), from a header the operator
// trusts (only from the addresses it names), or the model's default — never from what a client
// merely claims (docs/resilience.md, "Priority tiers").
import { createHash } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import type { FrontRequest } from './front.js';
import type { TierConfig } from '../config/types.js';

export interface Tier {
  readonly name: string;
  /** 0 is the highest. */
  readonly rank: number;
  /** The lowest tier of the model (the first shed). */
  readonly lowest: boolean;
}

export class TierPolicy {
  private readonly ranks = new Map<string, Tier>();
  private readonly trusted = new BlockList();
  private readonly header: string | undefined;
  /** Requests already placed (weakly held: gone with the request). */
  private readonly seen = new WeakMap<FrontRequest, Tier>();

  constructor(private readonly s: TierConfig) {
    s.order.forEach((name, rank) => this.ranks.set(name, { name, rank, lowest: rank === s.order.length - 1 }));
    this.header = s.header?.toLowerCase();
    for (const src of s.trustedSources) {
      const [addr, bits] = src.split('/') as [string, string | undefined];
      const family = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.trusted.addAddress(addr, family);
      else this.trusted.addSubnet(addr, Number(bits), family);
    }
  }

  /**
   * The tier of `req`: its API key's, else the trusted header's, else the default. Looked up once
   * per request (a degraded level's admission and a wait for a worker both ask).
   */
  of(req: FrontRequest): Tier {
    let t = this.seen.get(req);
    if (t === undefined) this.seen.set(req, (t = this.lookup(req)));
    return t;
  }

  private lookup(req: FrontRequest): Tier {
    const auth = req.headers.authorization;
    if (auth !== undefined && this.s.keys.size > 0 && auth.startsWith('Bearer ')) {
      const t = this.s.keys.get(createHash('sha256').update(auth.slice(7).trim()).digest('hex'));
      if (t !== undefined) return this.ranks.get(t) as Tier;
    }
    if (this.header !== undefined) {
      const v = req.headers[this.header];
      if (v !== undefined && this.isTrusted(req.remoteAddress)) {
        const t = this.ranks.get(v.trim());
        if (t !== undefined) return t;
      }
    }
    return this.ranks.get(this.s.default) as Tier;
  }

  private isTrusted(addr: string): boolean {
    if (addr === '') return false;
    // an IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d
    const v4 = addr.startsWith('::ffff:') ? addr.slice(7) : addr;
    return this.trusted.check(v4, isIP(v4) === 6 ? 'ipv6' : 'ipv4');
  }
}
