// The rolling update's arithmetic (docs/rolling.md), pure: surge and unavailable budgets resolved as
// Kubernetes Deployments resolve them, the order in which a pool of several worker roles grows and
// shrinks so that its prefill/decode ratio stays within one worker of the target, the next step from
// what is live, and the route weights between the old and the new pool.
import { BadRequestError } from '../errors.js';
import type { RouteSpec } from '../domain/route.js';

/** A budget as given: a count of workers, or a share of a role's desired replicas ("25%"). */
export type Budget = { count: number } | { percent: number };

/** `1`, `"1"`, `"25%"` → a budget; anything else is a `invalid_rollout` error naming `what`. */
export function parseBudget(raw: unknown, what: string): Budget {
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 0) return { count: raw };
  if (typeof raw === 'string') {
    if (/^\d+$/.test(raw)) return { count: Number(raw) };
    const m = /^(\d+(?:\.\d+)?)%$/.exec(raw);
    if (m && Number(m[1]) <= 100) return { percent: Number(m[1]) };
  }
  throw new BadRequestError(
    'invalid_rollout',
    `${what}: expected a count of workers (0, 1, 2…) or a percentage from 0% to 100% such as "25%", got ${JSON.stringify(raw)}`,
  );
}

/** A budget as an operator writes it: `1`, `"25%"`. */
export function budgetText(b: Budget): number | string {
  return 'count' in b ? b.count : `${b.percent}%`;
}

/** Workers of a role `b` stands for: a percentage of `desired`, rounded up (surge) or down (unavailable). */
export function resolveBudget(b: Budget, desired: number, round: 'up' | 'down'): number {
  if ('count' in b) return b.count;
  const x = (b.percent / 100) * desired;
  // a share that is a whole number up to float noise (10% of 30) is that number
  const near = Math.round(x);
  if (Math.abs(x - near) < 1e-9) return near;
  return round === 'up' ? Math.ceil(x) : Math.floor(x);
}

/** One role's budgets: at most `desired + surge` workers of it, at least `desired - unavailable` of it serving. */
export interface RoleBudget {
  desired: number;
  surge: number;
  unavailable: number;
}

/**
 * Each role's budgets, as a Deployment resolves them for its replicas: surge rounds up, unavailable
 * rounds down; a role whose surge and unavailable are both 0 could never move (`invalid_rollout`).
 */
export function roleBudgets(desired: Readonly<Record<string, number>>, surge: Budget, unavailable: Budget): Record<string, RoleBudget> {
  const out: Record<string, RoleBudget> = {};
  for (const [role, d] of Object.entries(desired)) {
    if (!Number.isInteger(d) || d < 1) throw new BadRequestError('invalid_rollout', `role ${role}: desired replicas must be a positive integer, got ${d}`);
    const s = resolveBudget(surge, d, 'up');
    const u = Math.min(d, resolveBudget(unavailable, d, 'down'));
    if (s === 0 && u === 0) {
      throw new BadRequestError(
        'invalid_rollout',
        `role ${role} (${d} replicas): max surge and max unavailable both come to 0 workers, so no worker could ever be replaced; allow one of them at least one worker`,
      );
    }
    out[role] = { desired: d, surge: s, unavailable: u };
  }
  const roles = Object.keys(out);
  for (const role of roles) {
    const b = out[role] as RoleBudget;
    // with several roles a pool missing one serves nothing: a single worker of a role with no surge
    // would leave both pools unable to serve, a downtime of every role the budgets never allowed
    if (roles.length > 1 && b.desired === 1 && b.surge === 0) {
      throw new BadRequestError(
        'invalid_rollout',
        `role ${role} has 1 replica and max surge 0: its only worker would have to stop before its replacement starts, and neither pool could serve meanwhile; allow it a surge of 1 (e.g. --max-surge 1), or use stop-start`,
      );
    }
  }
  return out;
}

/**
 * The order in which a pool of these roles grows, one worker at a time, from empty to `desired`:
 * first one of each role (a pool serves only with every role present), then always the role
 * furthest behind its share (lowest count ÷ desired; ties to the larger role, then by name). Every
 * prefix keeps each role within one worker of its proportional count; a pool shrinks in the reverse
 * order.
 */
export function growthOrder(desired: Readonly<Record<string, number>>): string[] {
  const roles = Object.keys(desired).sort((a, b) => (desired[b] as number) - (desired[a] as number) || a.localeCompare(b));
  const count: Record<string, number> = {};
  const order: string[] = [];
  for (const r of roles) {
    count[r] = 1;
    order.push(r);
  }
  const total = roles.reduce((n, r) => n + (desired[r] as number), 0);
  while (order.length < total) {
    let best: string | undefined;
    for (const r of roles) {
      const c = count[r] as number;
      const d = desired[r] as number;
      if (c >= d) continue;
      if (best === undefined || c / d < (count[best] as number) / (desired[best] as number)) best = r;
    }
    const b = best as string;
    count[b] = (count[b] as number) + 1;
    order.push(b);
  }
  return order;
}

/** One role's workers now. `old`: the old pool's live, serving workers; `ready`/`starting`: the new pool's. */
export interface RoleNow {
  old: number;
  ready: number;
  starting: number;
}

export interface RollingStep {
  /** New workers to start now, per role. */
  start: Record<string, number>;
  /** Old workers to drain and stop now, per role (the route first moves traffic off them). */
  stop: Record<string, number>;
  /** Nothing left to do: the new pool is complete and the old one gone. */
  done: boolean;
  /** Why nothing can move now, when nothing does and the update is not done (waiting for readiness, budgets). */
  waiting: string | undefined;
}

/**
 * The next step of a rolling update from what is live. New workers are started along the growth
 * order while each one's role stays within `desired + surge` workers (old, ready and starting);
 * old workers are stopped along the reverse order while each one's role keeps at least
 * `desired - unavailable` serving (old and ready) and the old pool keeps more than `partition`
 * workers. The old pool's last workers (one of each role) go together, when the new pool serves
 * alone. Starts are computed against what the stops leave, so that `--max-surge 0` frees a GPU first.
 */
export function nextStep(now: Readonly<Record<string, RoleNow>>, budgets: Readonly<Record<string, RoleBudget>>, partitionGiven = 0): RollingStep {
  const roles = Object.keys(budgets);
  // a partition keeps a whole pool: at least one worker of each role (one fewer would serve nothing)
  const partition = partitionGiven > 0 ? Math.max(partitionGiven, roles.length) : 0;
  const desired = Object.fromEntries(roles.map((r) => [r, (budgets[r] as RoleBudget).desired]));
  const order = growthOrder(desired);
  const cur = Object.fromEntries(roles.map((r) => [r, { ...(now[r] ?? { old: 0, ready: 0, starting: 0 }) }])) as Record<string, RoleNow>;
  const stop: Record<string, number> = Object.fromEntries(roles.map((r) => [r, 0]));
  const start: Record<string, number> = Object.fromEntries(roles.map((r) => [r, 0]));
  const oldTotal = () => roles.reduce((n, r) => n + (cur[r] as RoleNow).old, 0);

  // stops: the old pool shrinks in reverse growth order, from the position its size stands at; when
  // that role's budget forbids it, another role may go first as long as the old pool's ratio stays
  // within one worker
  for (;;) {
    const left = oldTotal();
    if (left <= partition || left === 0) break;
    if (roles.every((r) => (cur[r] as RoleNow).old === 1)) {
      // the old pool's last workers (one of each role) go together — a pool missing a role serves
      // nothing — and only if what the new pool has ready is within every role's budget; with
      // several roles the new pool must serve (a ready worker of each), or the model would go dark
      // for want of a role no per-role budget priced in
      const floor = (r: string) => {
        const b = budgets[r] as RoleBudget;
        return roles.length > 1 ? Math.max(1, b.desired - b.unavailable) : b.desired - b.unavailable;
      };
      if (roles.some((r) => (cur[r] as RoleNow).ready < floor(r))) break;
      if (left - roles.length < partition) break;
      for (const r of roles) {
        (cur[r] as RoleNow).old--;
        stop[r] = (stop[r] as number) + 1;
      }
      break;
    }
    const counts = Object.fromEntries(roles.map((r) => [r, (cur[r] as RoleNow).old]));
    const first = shrinkNext(cur, order, roles);
    const candidates = [first, ...roles.filter((r) => r !== first)];
    const role = candidates.find((r) => {
      if (r === undefined) return false;
      const c = cur[r] as RoleNow;
      const b = budgets[r] as RoleBudget;
      // a role's last old worker goes only with the whole pool (above)
      if (c.old <= 1 || c.old - 1 + c.ready < b.desired - b.unavailable) return false;
      return r === first || ratioKept({ ...counts, [r]: c.old - 1 }, desired);
    });
    if (role === undefined) break;
    (cur[role] as RoleNow).old--;
    stop[role] = (stop[role] as number) + 1;
  }

  // starts: the new pool grows in growth order while each role has room under its surge; when the
  // next role in that order has none (its old workers must go first), another role may go ahead as
  // long as the pool's ratio stays within one worker
  const room = (r: string) => {
    const c = cur[r] as RoleNow;
    const b = budgets[r] as RoleBudget;
    return c.ready + c.starting < b.desired && c.old + c.ready + c.starting + 1 <= b.desired + b.surge;
  };
  // with one role and a partition the new pool stops where the old one does: the two together are the
  // desired size, no surge worker kept while paused (with several roles the ratio decides the sizes)
  const cap = roles.length === 1 ? order.length - partition : order.length;
  for (;;) {
    const counts = Object.fromEntries(roles.map((r) => [r, (cur[r] as RoleNow).ready + (cur[r] as RoleNow).starting]));
    const size = roles.reduce((n, r) => n + (counts[r] as number), 0);
    if (size >= cap) break;
    // a start keeps the pool within one worker of the ratio, or at least no further from it than
    // it is (a pool thrown off by failed workers can still recover)
    const before = deviation(counts, desired);
    const keeps = (r: string) => {
      const d = deviation({ ...counts, [r]: (counts[r] as number) + 1 }, desired);
      return d <= 1 || d <= before;
    };
    let role: string | undefined = order[size];
    if (role === undefined || !room(role) || !keeps(role)) {
      role = roles
        .filter((r) => room(r) && keeps(r))
        .sort((x, y) => (counts[x] as number) / (desired[x] as number) - (counts[y] as number) / (desired[y] as number))[0];
      // a pool's first workers are one of each role: none goes ahead alone while another role is missing
      if (role !== undefined && roles.some((r) => r !== role && counts[r] === 0) && (counts[role] as number) > 0) role = undefined;
    }
    if (role === undefined) break;
    (cur[role] as RoleNow).starting++;
    start[role] = (start[role] as number) + 1;
  }

  const moved = roles.some((r) => (start[r] as number) > 0 || (stop[r] as number) > 0);
  const complete = roles.every((r) => (cur[r] as RoleNow).ready === (budgets[r] as RoleBudget).desired && (cur[r] as RoleNow).starting === 0);
  const done = !moved && complete && oldTotal() === 0;
  let waiting: string | undefined;
  if (!moved && !done) {
    const pending = roles.reduce((n, r) => n + (cur[r] as RoleNow).starting, 0);
    waiting =
      pending > 0
        ? `waiting for ${pending} new worker(s) to be ready`
        : oldTotal() <= partition && oldTotal() > 0
          ? `paused at the partition: ${oldTotal()} old worker(s) left`
          : 'the budgets allow no move: no surge room and no unavailable room';
  }
  return { start, stop, done, waiting };
}

/** The role whose old worker goes next: the pool shrinks along the growth order, backwards. */
function shrinkNext(cur: Readonly<Record<string, RoleNow>>, order: readonly string[], roles: readonly string[]): string | undefined {
  // the old pool's size places it in the growth order; its last element is the role to remove,
  // provided the pool's counts match that prefix (they do when it was built or shrunk this way);
  // otherwise the most over-represented role goes
  const counts = Object.fromEntries(roles.map((r) => [r, (cur[r] as RoleNow).old]));
  const size = roles.reduce((n, r) => n + (counts[r] as number), 0);
  if (size === 0) return undefined;
  const prefix: Record<string, number> = Object.fromEntries(roles.map((r) => [r, 0]));
  for (let i = 0; i < size && i < order.length; i++) prefix[order[i] as string] = (prefix[order[i] as string] as number) + 1;
  if (roles.every((r) => prefix[r] === counts[r])) return order[size - 1];
  let best: string | undefined;
  let worst = -Infinity;
  for (const r of roles) {
    const c = counts[r] as number;
    const over = c - (prefix[r] as number);
    if (c > 0 && over > worst) {
      worst = over;
      best = r;
    }
  }
  return best;
}

/**
 * The share of traffic the new pool takes: its ready capacity over both pools' (a pool's capacity
 * is that of its scarcest role: min over roles of ready ÷ desired; a pool missing a role serves
 * nothing). 1 when only the new pool can serve, 0 when it cannot.
 */
/**
 * The route between the two pools at the new pool's `share` (the rest to the old, every other version
 * at 0, `stable` the update's from-version, no shadow); undefined when it would not change.
 */
export function routeAtShare(cur: RouteSpec, pool: { old: string; new: string }, stable: string, share: number): RouteSpec | undefined {
  const same = (v: string, w: number) => Math.abs((cur.weights[v] ?? 0) - w) < 1e-9;
  if (same(pool.new, share) && same(pool.old, 1 - share)) return undefined;
  const weights: Record<string, number> = { ...Object.fromEntries(Object.keys(cur.weights).map((k) => [k, 0])), [pool.old]: 1 - share };
  if (share > 0 || pool.new in cur.weights) weights[pool.new] = share;
  return { ...cur, weights, stable, shadow: undefined };
}

export function newShare(now: Readonly<Record<string, RoleNow>>, desired: Readonly<Record<string, number>>): number {
  let oldCap = Infinity;
  let newCap = Infinity;
  for (const [r, d] of Object.entries(desired)) {
    const c = now[r] ?? { old: 0, ready: 0, starting: 0 };
    oldCap = Math.min(oldCap, c.old / d);
    newCap = Math.min(newCap, c.ready / d);
  }
  if (!(newCap > 0)) return 0;
  if (!(oldCap > 0)) return 1;
  return newCap / (oldCap + newCap);
}

/**
 * Whether a pool's roles are within one worker of the ideal pool of its size: the growth order's
 * prefix of that length (one of each role, then in proportion to the desired counts).
 */
export function ratioKept(counts: Readonly<Record<string, number>>, desired: Readonly<Record<string, number>>): boolean {
  return deviation(counts, desired) <= 1;
}

/** How many workers the pool's most misplaced role is from the ideal pool of its size. */
function deviation(counts: Readonly<Record<string, number>>, desired: Readonly<Record<string, number>>): number {
  const roles = Object.keys(desired);
  const size = roles.reduce((n, r) => n + (counts[r] ?? 0), 0);
  const ideal: Record<string, number> = Object.fromEntries(roles.map((r) => [r, 0]));
  for (const r of growthOrder(desired).slice(0, size)) ideal[r] = (ideal[r] as number) + 1;
  return Math.max(0, ...roles.map((r) => Math.abs((counts[r] ?? 0) - (ideal[r] as number))));
}

/** One step of a dry run: the live counts after it, per role, and the new pool's share of traffic. */
export interface DryRunStep {
  now: Record<string, RoleNow>;
  share: number;
}

/**
 * The whole update with every new worker ready by the next step (the fastest it can go): its steps,
 * and where it would get stuck, if it would. A stuck plan is refused before anything starts.
 */
export function dryRun(budgets: Readonly<Record<string, RoleBudget>>, partition = 0): { steps: DryRunStep[]; stuck: string | undefined } {
  const roles = Object.keys(budgets);
  const desired = Object.fromEntries(roles.map((r) => [r, (budgets[r] as RoleBudget).desired]));
  const now: Record<string, RoleNow> = Object.fromEntries(roles.map((r) => [r, { old: desired[r] as number, ready: 0, starting: 0 }]));
  const steps: DryRunStep[] = [];
  const limit = 4 * roles.reduce((n, r) => n + (desired[r] as number), 0) + 4;
  for (let i = 0; i < limit; i++) {
    for (const r of roles) {
      const c = now[r] as RoleNow;
      c.ready += c.starting;
      c.starting = 0;
    }
    const s = nextStep(now, budgets, partition);
    for (const r of roles) {
      const c = now[r] as RoleNow;
      c.old -= s.stop[r] as number;
      c.starting += s.start[r] as number;
    }
    steps.push({ now: Object.fromEntries(roles.map((r) => [r, { ...(now[r] as RoleNow) }])), share: newShare(now, desired) });
    if (s.done) return { steps, stuck: undefined };
    const moving = roles.some((r) => (now[r] as RoleNow).starting > 0);
    if (!moving && s.waiting !== undefined) {
      const at = roles.map((r) => `${r} ${(now[r] as RoleNow).old} old, ${(now[r] as RoleNow).ready} new`).join('; ');
      return { steps, stuck: s.waiting.startsWith('paused') ? undefined : `at step ${i + 1} (${at})` };
    }
  }
  return { steps, stuck: `no end after ${limit} steps` };
}

/** Refuse budgets under which the update could not finish while keeping the ratio (`invalid_rollout`, with where it would stop). */
export function assertFeasible(budgets: Readonly<Record<string, RoleBudget>>, partition = 0): void {
  const { stuck } = dryRun(budgets, partition);
  if (stuck === undefined) return;
  const roles = Object.entries(budgets)
    .map(([r, b]) => `${r} ${b.desired} (surge ${b.surge}, unavailable ${b.unavailable})`)
    .join(', ');
  throw new BadRequestError(
    'invalid_rollout',
    `with these budgets (${roles}) the update would get stuck ${stuck}: no worker could start or stop without breaking a budget or the roles' ratio; allow more surge (e.g. --max-surge 1) or more unavailability`,
  );
}
