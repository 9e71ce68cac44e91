// Routes: the immutable per-model snapshot that says which versions serve and in what shares.
// Pure: building, validating and comparing routes; the gateway holds the current one by reference.

export interface RouteSpec {
  model: string;
  /** version id → weight: fractions summing to 1 (±1e-9) or non-negative integers (normalised). */
  weights: Readonly<Record<string, number>>;
  /**
   * The version everyone returns to when candidates are at 0. Defaults to the previous route's
   * stable while it still has weight, else to the version with the largest weight (first listed
   * on ties).
   */
  stable?: string | undefined;
  /** category → version id (x-glidepath-category). */
  overrides?: Readonly<Record<string, string>> | undefined;
  stickySalt?: string | undefined;
  /** Mirror a share of requests to a version that is not otherwise served. */
  shadow?: { version: string; share: number } | undefined;
}

export interface RouteVersion {
  readonly id: string;
  readonly weight: number;
}

/** A validated, normalised, frozen route. Replaced whole; never mutated. */
export interface RouteSnapshot {
  readonly model: string;
  /** Monotonic per model; set by whoever publishes. */
  readonly revision: number;
  readonly stable: string;
  /** Candidates first (fixed order), stable last: sticky hashing relies on this order. */
  readonly versions: readonly RouteVersion[];
  /** Upper bounds of each candidate's interval in [0,1) for sticky hashing (stable takes the rest). */
  readonly stickyBounds: readonly number[];
  readonly overrides: Readonly<Record<string, string>>;
  readonly stickySalt: string | undefined;
  readonly shadow: { readonly version: string; readonly share: number } | undefined;
  readonly createdAt: number;
}

export class RouteValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RouteValidationError';
  }
}

const EPS = 1e-9;

/** Validate weights and return them normalised to fractions; throws RouteValidationError naming the problem. */
export function normaliseWeights(weights: Readonly<Record<string, number>>): Record<string, number> {
  const entries = Object.entries(weights);
  if (entries.length === 0) throw new RouteValidationError('a route needs at least one version');
  for (const [id, w] of entries) {
    if (typeof w !== 'number' || !Number.isFinite(w)) throw new RouteValidationError(`weight of ${id} must be a finite number, got ${String(w)}`);
    if (w < 0) throw new RouteValidationError(`weight of ${id} must not be negative, got ${w}`);
  }
  const total = entries.reduce((s, [, w]) => s + w, 0);
  if (total <= 0) throw new RouteValidationError('weights sum to 0: at least one version needs a positive weight');
  // finite weights whose sum is not (1e308 + 1e308): each would normalise to 0, a route that serves nothing
  if (!Number.isFinite(total))
    throw new RouteValidationError(`weights sum to ${total}, past the largest number: give smaller weights (e.g. fractions, or integers such as 95 and 5)`);
  const integers = entries.every(([, w]) => Number.isInteger(w));
  if (!integers && Math.abs(total - 1) > EPS) throw new RouteValidationError(`fractional weights must sum to 1 within 1e-9, got ${total}`);
  const out: Record<string, number> = {};
  // with a finite sum, no positive weight normalises to 0 (an integer weight is at least 1, and 1 / 1.8e308 is a subnormal > 0)
  for (const [id, w] of entries) out[id] = w / total;
  return out;
}

/**
 * Build a snapshot from a spec. `order` fixes the candidates' order across successive routes so
 * sticky users only ever move into a growing candidate (pass the previous snapshot's order).
 */
export function buildRoute(spec: RouteSpec, revision: number, knownVersions: ReadonlySet<string>, now = Date.now(), previous?: RouteSnapshot): RouteSnapshot {
  const weights = normaliseWeights(spec.weights);
  for (const id of Object.keys(weights)) {
    if (!knownVersions.has(id)) throw new RouteValidationError(`unknown version ${JSON.stringify(id)} for model ${spec.model}`);
  }
  const ids = Object.keys(weights);
  let stable = spec.stable;
  if (stable === undefined && previous !== undefined && (weights[previous.stable] ?? 0) > 0) {
    // keep the stable a growing candidate is measured against: if it flipped to the largest weight
    // (a canary past 50%), the sticky layout would reverse and move users out of the canary
    stable = previous.stable;
  } else if (stable === undefined) {
    stable = ids.reduce((best, id) => ((weights[id] ?? 0) > (weights[best] ?? 0) ? id : best), ids[0] as string);
  } else if (!(stable in weights)) {
    throw new RouteValidationError(`stable version ${JSON.stringify(stable)} is not in the route's weights`);
  }
  const overrides = { ...(spec.overrides ?? {}) };
  for (const [cat, id] of Object.entries(overrides)) {
    if (!knownVersions.has(id)) throw new RouteValidationError(`override ${JSON.stringify(cat)} names unknown version ${JSON.stringify(id)}`);
  }
  if (spec.shadow) {
    if (!knownVersions.has(spec.shadow.version)) throw new RouteValidationError(`shadow names unknown version ${JSON.stringify(spec.shadow.version)}`);
    if (!(spec.shadow.share >= 0 && spec.shadow.share <= 1)) throw new RouteValidationError(`shadow share must be in [0,1], got ${spec.shadow.share}`);
  }
  // Candidates keep the order they had in the previous route; new ones go after, by id.
  const prevOrder = previous ? previous.versions.map((v) => v.id) : [];
  const candidates = ids.filter((id) => id !== stable);
  candidates.sort((a, b) => {
    const ia = prevOrder.indexOf(a);
    const ib = prevOrder.indexOf(b);
    if (ia !== -1 || ib !== -1) return (ia === -1 ? Infinity : ia) - (ib === -1 ? Infinity : ib);
    return a < b ? -1 : a > b ? 1 : 0;
  });
  const versions: RouteVersion[] = [...candidates, stable].map((id) => Object.freeze({ id, weight: weights[id] ?? 0 }));
  const stickyBounds: number[] = [];
  let acc = 0;
  for (const c of candidates) {
    acc += weights[c] ?? 0;
    stickyBounds.push(acc);
  }
  return Object.freeze({
    model: spec.model,
    revision,
    stable,
    versions: Object.freeze(versions),
    stickyBounds: Object.freeze(stickyBounds),
    overrides: Object.freeze(overrides),
    stickySalt: spec.stickySalt,
    shadow: spec.shadow ? Object.freeze({ ...spec.shadow }) : undefined,
    createdAt: now,
  });
}

/** The spec a snapshot was built from (for persistence and the admin API). */
export function routeToSpec(r: RouteSnapshot): RouteSpec {
  const weights: Record<string, number> = {};
  for (const v of r.versions) weights[v.id] = v.weight;
  return { model: r.model, weights, stable: r.stable, overrides: r.overrides, stickySalt: r.stickySalt, shadow: r.shadow };
}

/** Versions that receive traffic (weight > 0, override targets, shadow). */
/**
 * The route that sends everything to `active`: the version gone (`gone`) out of it, overrides naming
 * it dropped, the other versions kept at weight 0 (a standby stays reachable by header), the sticky
 * salt kept, no shadow.
 */
export function routeOnlyTo(cur: RouteSpec, active: string, gone: string): RouteSpec {
  const overrides = Object.fromEntries(Object.entries(cur.overrides ?? {}).filter(([, v]) => v !== gone));
  const weights: Record<string, number> = {};
  for (const v of Object.keys(cur.weights)) if (v !== gone) weights[v] = 0;
  weights[active] = 1;
  return { model: cur.model, weights, stable: active, overrides, stickySalt: cur.stickySalt, shadow: undefined };
}

export function servedVersions(r: RouteSnapshot): Set<string> {
  const s = new Set<string>();
  for (const v of r.versions) if (v.weight > 0) s.add(v.id);
  for (const id of Object.values(r.overrides)) s.add(id);
  if (r.shadow && r.shadow.share > 0) s.add(r.shadow.version);
  return s;
}
