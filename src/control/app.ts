// The composition root: config → store → telemetry → data plane → providers → control plane →
// ports → controllers → listeners. Everything is built per App: two Apps in one process share nothing.
// With `store: {kind: etcd}` the same parts make a cluster replica instead (cluster.ts).
import { httpAdapterLoader } from '../providers/lora.js';
import type { GlidepathConfig } from '../config/types.js';
import { Telemetry } from '../telemetry/telemetry.js';
import { DataPlane } from '../gateway/dataplane.js';
import type { DegradationListener } from '../gateway/admission.js';
import { createDataServer, parseHostPort, startListening } from '../gateway/server.js';
import type { ListeningServer } from '../gateway/server.js';
import { Providers } from '../providers/index.js';
import { openConfiguredStore } from '../store/open.js';
import type { Store } from '../store/types.js';
import { Authenticator, bootstrapTokens, clusterToken } from '../api/auth.js';
import { createAdminServer } from '../api/server.js';
import type { AdminServer, AdminServerOptions } from '../api/server.js';
import type { ControllerPorts } from '../rollout/ports.js';
import { buildControllers } from './controllers.js';
import type { Controllers } from './controllers.js';
import { ControlPlane } from './plane.js';
import { controlPorts } from './ports.js';

export interface App {
  cfg: GlidepathConfig;
  cp: ControlPlane;
  /** What the controllers see (src/rollout/ports.ts), implemented over `cp`. */
  ports: ControllerPorts;
  controllers: Controllers;
  store: Store;
  data: ListeningServer;
  admin: ListeningServer;
  dataUrl: string;
  adminUrl: string;
  adminTokenHint: string;
  close(opts?: { stopWorkers?: boolean }): Promise<void>;
}

export interface StartOptions {
  onProgress?: (m: string) => void;
  providers?: Providers;
  /** The admin listener's dashboard (its front end's folder, its sessions): tests set them. */
  admin?: AdminServerOptions;
  /** Aborted (a signal to `glidepath up` while it boots): the worker starts in flight are cancelled, and boot fails. */
  signal?: AbortSignal;
}

/** The data plane and its telemetry; `degradation` is where its level changes go once the control plane exists. */
export function buildDataPlane(cfg: GlidepathConfig): { dp: DataPlane; onDegradation: (l: DegradationListener) => void } {
  const telemetry = new Telemetry(cfg.telemetry);
  let degradationChanged: DegradationListener = () => undefined;
  const dp = new DataPlane(cfg.gateway, telemetry, { onDegradation: (m, c) => degradationChanged(m, c), adapterLoader: httpAdapterLoader });
  return { dp, onDegradation: (l) => (degradationChanged = l) };
}

/** The control side over a data plane: booted from the store (or the config), controllers running, and an admin server not yet listening. */
export interface Control {
  cp: ControlPlane;
  ports: ControllerPorts;
  controllers: Controllers;
  adminServer: AdminServer;
  adminTokenHint: string;
}

/**
 * Boot the control plane over `dp` and start its controllers. `ready` runs once the fleet is up and before
 * the controllers run (the single process starts listening there). On failure, what started is stopped.
 */
export async function startControl(
  cfg: GlidepathConfig,
  store: Store,
  built: ReturnType<typeof buildDataPlane>,
  opts: StartOptions & { ready?: () => Promise<void>; created?: (cp: ControlPlane) => void } = {},
): Promise<Control> {
  const say = opts.onProgress ?? (() => undefined);
  const { dp } = built;
  const cp = new ControlPlane(cfg, store, dp, opts.providers ?? new Providers());
  // the caller decides what a failed start leaves behind (its workers stopped, or serving)
  opts.created?.(cp);
  built.onDegradation((m, c) => cp.degradationChanged(m, c));
  const ports = controlPorts(cp);
  const controllers = buildControllers(cfg, ports, dp);
  let adminServer: AdminServer | undefined;
  const cancel = () => void cp.workers.cancelStarts();
  if (opts.signal?.aborted) cancel();
  opts.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const adminTokenHint = await bootstrapTokens(store, cfg.auth.tokens, cfg.server.dataDir, { cluster: cfg.store.kind === 'etcd' });
    if (cfg.store.kind === 'etcd') await clusterToken(store);
    await cp.boot(say);
    for (const m of cfg.models) dp.setAdmission(m.name, m.tiers, m.degradation);
    await cp.adapters.restore((why) => cp.events.emit({ kind: 'adapter_skipped', message: why }));
    await controllers.beforeServing();
    const auth = await Authenticator.load(store);
    adminServer = createAdminServer({ cp, controllers }, auth, cfg.limits.admin, opts.admin);
    await opts.ready?.();
    await controllers.run();
    return { cp, ports, controllers, adminServer, adminTokenHint };
  } catch (err) {
    controllers.shutdown();
    // (its series recorder runs from its creation)
    adminServer?.close();
    throw err;
  } finally {
    opts.signal?.removeEventListener('abort', cancel);
  }
}

export async function startGlidepath(cfg: GlidepathConfig, opts: StartOptions = {}): Promise<App> {
  const { store } = await openConfiguredStore(cfg);
  const built = buildDataPlane(cfg);
  const { dp } = built;
  let data: ListeningServer | undefined;
  let admin: ListeningServer | undefined;
  let control: Control | undefined;
  let cp: ControlPlane | undefined;
  try {
    control = await startControl(cfg, store, built, {
      ...opts,
      created: (c) => (cp = c),
      ready: async () => {
        const d = parseHostPort(cfg.server.listen);
        data = await startListening(createDataServer(dp, { limits: cfg.limits.dataPlane }), d.host, d.port);
      },
    });
    const a = parseHostPort(cfg.server.adminListen);
    admin = await startListening(control.adminServer, a.host, a.port);
    const dataS = data as unknown as ListeningServer;
    const adminS = admin;
    const { controllers } = control;
    const plane = control.cp;
    return {
      cfg,
      cp: plane,
      ports: control.ports,
      controllers,
      store,
      data: dataS,
      admin: adminS,
      dataUrl: dataS.url,
      adminUrl: adminS.url,
      adminTokenHint: control.adminTokenHint,
      async close(o = {}) {
        controllers.shutdown();
        await adminS.close();
        await dataS.close();
        await plane.shutdown(o.stopWorkers ?? true);
        await store.close();
      },
    };
  } catch (err) {
    control?.controllers.shutdown();
    await admin?.close();
    await data?.close();
    if (cp) await cp.shutdown(true).catch(() => undefined);
    else await dp.close().catch(() => undefined);
    await store.close();
    throw err;
  }
}
