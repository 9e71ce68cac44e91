// A cluster replica (`store: {kind: etcd}`, docs/cluster.md). Every replica serves the data plane and
// the admin API. One elected leader runs the control plane and the controllers. The other replicas
// mirror the store into their data planes and forward admin calls to the leader. A replica that wins
// the election boots the control plane over the data plane it already serves: adopting the workers,
// resuming the rollouts from the store. No listener moves and no request is dropped. One that loses its
// lease stops its controllers at once and serves on as a follower.
import { hostname } from 'node:os';
import type { GlidepathConfig } from '../config/types.js';
import { DEFAULTS } from '../defaults.js';
import { admission, createDataServer, parseHostPort, startListening } from '../gateway/server.js';
import type { ClosableServer, ListeningServer } from '../gateway/server.js';
import { openConfiguredStore } from '../store/open.js';
import { EtcdCoordination } from '../store/kv/coordination.js';
import type { Leadership } from '../store/kv/coordination.js';
import type { Store } from '../store/types.js';
import { admittingListener, createAdminServer, refusedRequest } from '../api/server.js';
import type { AdminServerOptions } from '../api/server.js';
import { UnavailableError } from '../errors.js';
import { Authenticator, CLUSTER_SECRET } from '../api/auth.js';
import { buildDataPlane, startControl } from './app.js';
import type { Control, StartOptions } from './app.js';
import { buildControllers } from './controllers.js';
import { createForwarder } from './forward.js';
import { Mirror } from './mirror.js';
import { RecordShipper, SampleShipper } from './shipper.js';
import type { ControlPlane } from './plane.js';

const C = DEFAULTS.cluster;

export type ReplicaRole = 'follower' | 'leader';

export interface Replica {
  cfg: GlidepathConfig;
  store: Store;
  /** This replica's name in the election and its status. */
  name: string;
  dataUrl: string;
  adminUrl: string;
  role(): ReplicaRole;
  /** The leader's admin URL, as the election says (undefined while there is none). */
  leader(): string | undefined;
  /** The control side while this replica leads (or led: its control plane stays with its workers). */
  control(): Control | undefined;
  close(opts?: { stopWorkers?: boolean }): Promise<void>;
}

export async function startReplica(cfg: GlidepathConfig, opts: StartOptions = {}): Promise<Replica> {
  const sc = cfg.store;
  if (sc.kind !== 'etcd') throw new Error('startReplica needs store: {kind: etcd}');
  const say = opts.onProgress ?? (() => undefined);
  const { store, etcd } = await openConfiguredStore(cfg);
  if (!etcd) throw new Error('an etcd store has an etcd connection');
  const name = sc.replica ?? `${hostname()}-${process.pid}`;
  const coord = new EtcdCoordination(etcd, sc.leaseTtlS);
  const built = buildDataPlane(cfg);
  const { dp } = built;
  // the admin port's admission (limits.admin), one for whichever role answers it: a follower's
  // forwarder and, once leading, the admin server (a connection is counted once, whoever answers it)
  const adm = admission('admin', cfg.limits.admin, dp.telemetry);
  const adminOptions: AdminServerOptions = { ...opts.admin, admission: adm };
  const stops: (() => Promise<void>)[] = [];
  let secret: string | undefined;
  const shipping = {
    replica: name,
    leader: () => (role === 'follower' ? leaderUrl : undefined),
    token: async () => (secret ??= await store.getSetting<string>(CLUSTER_SECRET).catch(() => undefined)),
    tokenRefused: () => (secret = undefined),
    onError: (m: string) => say(`glidepath: ${m}`),
  };
  const shipper = new RecordShipper(dp.telemetry, shipping);
  /** The answers this replica samples for the leader's LLM judge (with a `judge:` section). */
  const samples = cfg.judge ? new SampleShipper(dp, cfg.judge, shipping) : undefined;
  const newMirror = (): Mirror =>
    new Mirror(
      cfg,
      store,
      dp,
      (m) => say(`glidepath: ${m}`),
      (model) => samples?.tap(model),
    );
  let mirror = newMirror();
  let role: ReplicaRole = 'follower';
  let leaderUrl: string | undefined;
  let control: Control | undefined;
  let cp: ControlPlane | undefined;
  let leadership: Leadership | undefined;
  let closed = false;
  let connected = true;
  dp.telemetry.metrics.clusterStoreConnected.set(1);
  dp.telemetry.metrics.clusterLeader.set(0);
  let data: ListeningServer | undefined;
  let admin: ListeningServer | undefined;

  try {
    // watch first, then read: a change between the two is applied twice, never missed
    stops.push(
      await coord.watch(
        ['routes', 'versions', 'workers', 'settings', 'rollouts'],
        (c) => mirror.changed(c),
        (up) => {
          if (up === connected) return;
          connected = up;
          // back after an outage: what changed meanwhile is read again (a follower's mirror; a leader's is stopped)
          if (up) void mirror.syncAll(true);
          dp.telemetry.metrics.clusterStoreConnected.set(up ? 1 : 0);
          say(
            up ? `glidepath: ${name} reconnected to etcd` : `glidepath: ${name} LOST etcd: serving the last routes; admin writes are refused until it is back`,
          );
        },
      ),
    );
    await mirror.syncAll();
    shipper.start();
    samples?.start();
    const d = parseHostPort(cfg.server.listen);
    data = await startListening(createDataServer(dp, { limits: cfg.limits.dataPlane }), d.host, d.port);
    // the admin port: forwarded to the leader while following, this replica's own admin server while leading
    const forwarder = createForwarder(
      () => leaderUrl,
      () => (admin === undefined ? undefined : (sc.advertiseUrl ?? admin.url)),
      () => (role === 'leader' ? control?.adminServer.answer : undefined),
      (req) => refusedRequest(adm, req),
    );
    let target: ClosableServer = forwarder;
    const front = admittingListener(adm, () => target);
    front.on('close', () => {
      forwarder.close();
      control?.adminServer.close();
    });
    const a = parseHostPort(cfg.server.adminListen);
    // (the front accepted every connection, and closes only once they end: whichever server parses them must end them)
    const closeAllConnections = (): void => {
      forwarder.closeAllConnections();
      control?.adminServer.closeAllConnections();
    };
    admin = await startListening(Object.assign(front, { closeAllConnections }), a.host, a.port);
    // what the others reach this replica at (a listener on every address says nothing)
    forwarder.emit('listening');
    const adminUrl = sc.advertiseUrl ?? admin.url;
    /** Called on every change of who leads (a replica stopping waits on it to see another take over). */
    const leaderHeard = new Set<() => void>();
    stops.push(
      await coord.observe((v) => {
        leaderUrl = v;
        for (const f of leaderHeard) f();
      }),
    );

    /** A takeover under way (a replica stopping lets it end first: then it leads or follows). */
    let taking: Promise<void> | undefined;
    /** This replica holds the leader's lease (its campaign won and has not failed since). */
    let elected = false;
    const lead = async (): Promise<void> => {
      if (closed || role === 'leader' || taking) return;
      taking = takeOver().finally(() => (taking = undefined));
      await taking;
    };
    const takeOver = async (): Promise<void> => {
      say(`glidepath: ${name} leads the cluster: starting the control plane`);
      await mirror.stop();
      await shipper.stop({ flush: false });
      await samples?.stop({ flush: false });
      try {
        if (!control) {
          control = await startControl(cfg, store, built, {
            ...opts,
            admin: adminOptions,
            created: (c) => (cp = c),
            // the controllers never start on a lease lost while the fleet was being adopted
            ready: () => (elected ? Promise.resolve() : Promise.reject(new UnavailableError('not_leader', `${name} lost its lease while taking over`))),
          });
        } else {
          // led before, lost the lease, leads again: the same control plane, fresh controllers
          const controllers = buildControllers(cfg, control.ports, dp);
          const auth = await Authenticator.load(store);
          control = {
            ...control,
            controllers,
            adminServer: createAdminServer({ cp: control.cp, controllers }, auth, cfg.limits.admin, adminOptions),
          };
          await controllers.run();
        }
        if (!elected) {
          // the lease was lost while the control plane was starting: it must not act
          control.controllers.shutdown();
          control.adminServer.close();
          say(`glidepath: ${name} lost its lease while taking over; following again`);
          await follow();
          return;
        }
        role = 'leader';
        dp.telemetry.metrics.clusterLeader.set(1);
        // node:http arms its header and request timeouts on 'listening'; the front listens for it
        control.adminServer.emit('listening');
        target = control.adminServer;
        // a call still on a connection the forwarder accepted (one call each) is handed to the admin
        // server when it comes (createForwarder's local): none is reset by the election (it was, with
        // closeAllConnections: a client's read ECONNRESET)
        say(`glidepath: ${name} is the leader`);
      } catch (err) {
        say(`glidepath: ${name} could not take over as leader: ${(err as Error).message}; following again`);
        control?.controllers.shutdown();
        control?.adminServer.close();
        await follow();
        await leadership?.resign();
        campaign();
      }
    };
    const follow = async (): Promise<void> => {
      role = 'follower';
      if (closed) return; // stopping: nothing to mirror or ship any more
      dp.telemetry.metrics.clusterLeader.set(0);
      target = forwarder;
      mirror = newMirror();
      shipper.start();
      samples?.start();
      await mirror.syncAll(true);
    };
    // one campaign at a time: a failed campaign reports every error it meets, but stands again once
    let standing = 0;
    const campaign = (): void => {
      if (closed) return;
      const mine = ++standing;
      leadership = coord.campaign(adminUrl, {
        elected: () => {
          if (mine !== standing) return;
          if (closed) {
            // stopping: hold no lease another replica could use to take over
            void leadership?.resign();
            return;
          }
          elected = true;
          void lead();
        },
        lost: (err, wasLeader) => {
          if (closed || mine !== standing) return;
          standing++; // this campaign is over: later errors of it are ignored
          elected = false;
          if (wasLeader && role === 'leader') {
            say(`glidepath: ${name} LOST LEADERSHIP (${err.message}): controllers stopped; serving as a follower`);
            control?.controllers.shutdown();
            // clients kept alive on its admin server would still reach a control plane that no longer leads
            // (and calls the forwarder handed to it, on connections the forwarder parsed)
            closeAllConnections();
            // and it is done with (its series recorder stops): leading again builds another
            control?.adminServer.close();
            void follow();
          }
          setTimeout(campaign, 1_000).unref();
        },
      });
    };
    campaign();
    /** Whether another replica leads within `ms`, and still does `settleMs` later (one elected while stopping resigns at once). */
    const anotherLeads = (ms: number, settleMs: number): Promise<boolean> =>
      new Promise((resolve) => {
        let settle: NodeJS.Timeout | undefined;
        const done = (v: boolean) => {
          clearTimeout(limit);
          clearTimeout(settle);
          leaderHeard.delete(heard);
          resolve(v);
        };
        const heard = () => {
          clearTimeout(settle);
          settle = leaderUrl !== undefined && leaderUrl !== adminUrl ? setTimeout(() => done(true), settleMs) : undefined;
        };
        const limit = setTimeout(() => done(false), ms);
        leaderHeard.add(heard);
        heard();
      });
    /**
     * A replica stopping: its campaign resigned (never elected while it stops), and whether it stops the
     * workers. Only the leader acts on them (a replica that led once and lost its lease holds handles the
     * new leader now uses), and only when no other replica takes over: a replica restarted in a rolling
     * deploy of the gateways leaves the fleet serving, and the last one of a cluster stopped as a whole
     * stops it. etcd unreachable (who else stands is unknown): left running, to be adopted, never killed blind.
     */
    const standDown = async (): Promise<boolean> => {
      if (role !== 'leader') {
        await leadership?.resign();
        return false;
      }
      const n = await coord.candidates().catch(() => undefined);
      await leadership?.resign();
      if (n === undefined) {
        say(`glidepath: ${name} cannot reach etcd to see who else stands: its workers are left running for the next leader to adopt`);
        return false;
      }
      if (n > 1 && (await anotherLeads(C.handoverWaitMs, C.handoverSettleMs))) {
        say(`glidepath: ${name} handed over to ${leaderUrl ?? 'another replica'}: its workers are left running for it`);
        return false;
      }
      // counted alone (the others resigned first) or not taken over: either way the cluster is stopping
      say(`glidepath: ${name}: no other replica ${n > 1 ? 'took over' : 'stands'} (the cluster is stopping): stopping the workers`);
      return true;
    };
    say(`glidepath: ${name} joined the cluster at ${etcd.location} as a follower; campaigning for leader`);

    const dataS = data;
    const adminS = admin;
    return {
      cfg,
      store,
      name,
      dataUrl: dataS.url,
      adminUrl,
      role: () => role,
      leader: () => leaderUrl,
      control: () => control,
      async close(o = {}) {
        closed = true;
        await taking?.catch(() => undefined);
        await mirror.stop();
        await shipper.stop({ flush: true });
        await samples?.stop({ flush: true });
        control?.controllers.shutdown();
        // before the lease goes: the next leader must not find a start of this one still running (it stops
        // what it finds starting, and this one's start would go on: retry, or record a ready worker)
        await cp?.workers.cancelStarts();
        // resigned, not left to expire: another replica leads at once and adopts the workers
        const stopWorkers = (await standDown()) && (o.stopWorkers ?? true);
        for (const s of stops) await s();
        await adminS.close();
        await dataS.close();
        if (cp) await cp.shutdown(stopWorkers);
        else await dp.close();
        await store.close();
      },
    };
  } catch (err) {
    closed = true;
    for (const s of stops) await s().catch(() => undefined);
    await admin?.close();
    await data?.close();
    await dp.close().catch(() => undefined);
    await store.close();
    throw err;
  }
}
