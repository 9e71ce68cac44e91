// Cluster coordination over etcd, beside the store it shares a connection with: watching the records
// replicas mirror (routes, versions, workers) as they change, and electing the one replica that runs the
// controllers (an etcd lease: a leader that dies is replaced once its lease expires).
import type { Campaign, Election, ElectionObserver, IKeyValue, Watcher } from 'etcd3';
import type { EtcdKv } from './etcd.js';
import { K } from './keys.js';

export type MirroredArea = 'routes' | 'versions' | 'workers' | 'settings' | 'rollouts';

export interface RecordChange {
  area: MirroredArea;
  /** The record's key relative to the store's prefix. */
  key: string;
  /** The record (parsed JSON); undefined when it was deleted. */
  value: unknown;
}

export interface Leadership {
  /** Give it up (at shutdown): another replica is elected at once instead of after the lease. */
  resign(): Promise<void>;
}

const AREAS: Record<MirroredArea, string> = { routes: K.routes, versions: K.versions, workers: K.workers, settings: K.settings, rollouts: K.rollouts };

export class EtcdCoordination {
  private readonly election: Election;

  constructor(
    private readonly kv: EtcdKv,
    /** Seconds a dead leader's lease outlives it. */
    private readonly ttlS: number,
  ) {
    this.election = kv.client.namespace(kv.key('')).election('leader', Math.max(1, Math.round(ttlS)));
  }

  /**
   * Call `onChange` for every change of the areas' records, in commit order, from now on; `onConnection`
   * hears the watch losing and regaining etcd (etcd3 resumes it where it stopped). Resolves to a stopper.
   */
  async watch(areas: readonly MirroredArea[], onChange: (c: RecordChange) => void, onConnection: (up: boolean) => void): Promise<() => Promise<void>> {
    const watchers: Watcher[] = [];
    const cut = this.kv.key('').length;
    for (const area of areas) {
      const w = await this.kv.call(() => this.kv.client.watch().prefix(this.kv.key(AREAS[area])).create());
      const emit = (kv: IKeyValue, deleted: boolean) => {
        const key = kv.key.toString('utf8').slice(cut);
        let value: unknown;
        try {
          value = deleted ? undefined : (JSON.parse(kv.value.toString('utf8')) as unknown);
        } catch {
          return; // not a record of ours: nothing to mirror
        }
        onChange({ area, key, value });
      };
      w.on('put', (kv) => emit(kv, false));
      w.on('delete', (kv) => emit(kv, true));
      w.on('disconnected', () => onConnection(false));
      w.on('connected', () => onConnection(true));
      w.on('error', () => onConnection(false));
      watchers.push(w);
    }
    return async () => {
      await Promise.all(watchers.map((w) => w.cancel().catch(() => undefined)));
    };
  }

  /**
   * Stand for leader with `value` (this replica's admin URL, where the others forward writes). `elected`
   * is called once this replica leads; `lost` when the campaign fails — before the election (etcd
   * unreachable: stand again later) or after it (the lease is lost: stop acting as leader at once).
   */
  campaign(value: string, on: { elected(): void; lost(err: Error, wasLeader: boolean): void }): Leadership {
    const c: Campaign = this.election.campaign(value);
    let elected = false;
    c.on('elected', () => {
      // every commit of the leader from now on also compares its election key: a replica that lost the
      // lease (and does not know it yet) can write nothing
      this.fence(c)
        .then(() => {
          elected = true;
          on.elected();
        })
        .catch((err: unknown) => on.lost(err as Error, false));
    });
    c.on('error', (err) => {
      on.lost(err, elected);
      elected = false;
    });
    return { resign: () => c.resign().catch(() => undefined) };
  }

  /** Fence this process's commits with the campaign's key (its create revision): valid while it leads. */
  private async fence(c: Campaign): Promise<void> {
    const key = await c.getCampaignKey();
    const res = await this.kv.call(() => this.kv.client.kv.range({ key: Buffer.from(key, 'utf8') }));
    const kv = res.kvs[0];
    if (!kv) throw new Error('the election key vanished as this replica was elected');
    this.kv.fence = { key, createRevision: String(kv.create_revision) };
  }

  /** How many replicas stand for leader now, this one included (their campaign keys, each on its lease). */
  async candidates(): Promise<number> {
    return this.kv.call(() => this.kv.client.getAll().prefix(this.kv.key('election/leader/')).count());
  }

  /** Follow who leads: `onChange` with the leader's value (undefined: none). Resolves to a stopper. */
  async observe(onChange: (leader: string | undefined) => void): Promise<() => Promise<void>> {
    const o: ElectionObserver = await this.kv.call(() => this.election.observe());
    o.on('change', onChange);
    o.on('error', () => undefined);
    o.on('disconnected', () => undefined);
    onChange(o.leader());
    return () => o.cancel().catch(() => undefined);
  }
}
