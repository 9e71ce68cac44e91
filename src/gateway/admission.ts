// A model's admission under degradation: its capacity (healthy workers of the versions in its route,
// each worth its measured or configured throughput × its health weight; capacity.ts) against the throughput it must serve,
// the level that ratio sets, and what each level refuses or limits: new requests by tier, max_tokens,
// each worker's request slots (docs/resilience.md).
import type { DegradationConfig, TierConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { TooManyRequestsError, UnavailableError } from '../errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { Degradation, levelShare } from './degradation.js';
import type { DegradationLevel, LevelChange } from './degradation.js';
import type { FrontRequest } from './front.js';
import type { ParsedRequest } from './request.js';
import { TierPolicy } from './tiers.js';
import { Capacity } from './capacity.js';
import type { AdmittedModel } from './capacity.js';

/** Told of every change of a model's level. */
export type DegradationListener = (model: string, change: LevelChange) => void;

const G = DEFAULTS.gateway;

export class Admission {
  private readonly model: string;
  private readonly tiers: TierPolicy;
  private readonly degradation: Degradation | undefined;
  /** What the model can serve (undefined: degradation is off). */
  readonly capacity: Capacity | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly m: AdmittedModel,
    tiers: TierConfig | undefined,
    private readonly cfg: DegradationConfig | undefined,
    private readonly metrics: GatewayMetrics,
    private readonly listener: DegradationListener | undefined,
  ) {
    this.model = m.name;
    this.tiers = new TierPolicy({
      order: tiers?.order ?? G.tiers,
      default: tiers?.default ?? G.defaultTier,
      header: tiers?.header,
      trustedSources: tiers?.trustedSources ?? [],
      keys: tiers?.keys ?? new Map(),
    });
    this.degradation = cfg === undefined ? undefined : new Degradation(G.degradationMargin, cfg.recoverAfterMs);
    this.capacity = cfg === undefined ? undefined : new Capacity(m, cfg, metrics, () => this.reassess());
  }

  /** 0 when nothing is degraded (or degradation is off): the request path's one check. */
  get level(): DegradationLevel {
    return this.degradation?.level ?? 0;
  }

  get ratio(): number {
    return this.degradation?.ratio ?? 1;
  }

  /** The queue lane of `req` when it must wait for a worker: 1 + its tier's rank (lane 0 is a broken stream's continuation). */
  lane(req: FrontRequest): number {
    return 1 + this.tiers.of(req).rank;
  }

  /** Every worker of the model takes the share of its request slots the level leaves (a pool added, a level changed). */
  shareSlots(): void {
    const share = levelShare(this.level);
    for (const p of this.m.pools.values()) p.setConcurrency(share);
  }

  /** Look at the capacity again (a worker's health, routability or the route changed; or a recovery is due). */
  reassess(now = Date.now()): void {
    const d = this.degradation;
    const cfg = this.cfg;
    if (d === undefined || cfg === undefined || this.capacity === undefined) {
      this.shareSlots();
      return;
    }
    const ratio = this.capacity.total() / cfg.requiredTokensPerS;
    const change = d.assess(ratio, now);
    this.shareSlots();
    this.metrics.capacityRatio.labels(this.model).set(ratio);
    this.metrics.health.admissionLevel(this.model, d.level);
    if (change !== undefined) this.listener?.(this.model, change);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const due = d.dueIn(now);
    if (due === due) {
      this.timer = setTimeout(() => this.reassess(), Math.ceil(due) + 1);
      this.timer.unref();
    }
  }

  /**
   * A new request at a degraded level: refused (thrown: 503 at level 4, 429 for the lowest tier from
   * level 2), or admitted — below the top tier with its `max_tokens` capped at level 3.
   */
  admit(req: FrontRequest, parsed: ParsedRequest): ParsedRequest {
    const level = this.level;
    // level 1 refuses and caps nothing (its fewer slots are the workers' business)
    if (level < 2) return parsed;
    const retryAfterS = G.shedRetryAfterS;
    const ratio = this.ratio.toFixed(2);
    const tier = this.tiers.of(req);
    if (level >= 4) {
      this.metrics.shed.labels(this.model, tier.name, 'level_4').inc();
      throw new UnavailableError(
        'degraded_unavailable',
        `model ${this.model} is at degradation level 4 (capacity ${ratio} of what it must serve): no new requests until workers come back`,
        { retryAfterS },
      );
    }
    if (tier.lowest && tier.rank > 0) {
      this.metrics.shed.labels(this.model, tier.name, `level_${level}`).inc();
      throw new TooManyRequestsError(
        'tier_shed',
        `model ${this.model} is degraded (level ${level}, capacity ${ratio} of what it must serve) and sheds tier ${tier.name}`,
        { retryAfterS },
      );
    }
    if (level >= 3 && tier.rank > 0) return capped(parsed, (this.cfg as DegradationConfig).maxTokensDegraded);
    return parsed;
  }

  close(): void {
    this.capacity?.close();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** The request with at most `cap` tokens: both limit fields (an engine may read either) at most `cap`, never raised; the body rewritten when that changes it. */
function capped(parsed: ParsedRequest, cap: number): ParsedRequest {
  const body = { ...parsed.body };
  let changed = false;
  for (const key of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = body[key];
    if (typeof v === 'number' && v > cap) {
      body[key] = cap;
      changed = true;
    }
  }
  if (typeof body.max_tokens !== 'number' && typeof body.max_completion_tokens !== 'number') {
    body.max_tokens = cap;
    changed = true;
  }
  if (!changed) return parsed;
  return { ...parsed, body, raw: Buffer.from(JSON.stringify(body)), maxTokens: Math.min(parsed.maxTokens ?? cap, cap) };
}
