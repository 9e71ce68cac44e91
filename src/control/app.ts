// The composition root: config → store → telemetry → data plane → providers → control plane →
// ports → controllers → listeners. Everything is built per App: two Apps in one process share nothing.
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
import { Authenticator, bootstrapTokens } from '../api/auth.js';
import { createAdminServer } from '../api/server.js';
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

export async function startGlidepath(cfg: GlidepathConfig, opts: { onProgress?: (m: string) => void; providers?: Providers } = {}): Promise<App> {
  const say = opts.onProgress ?? (() => undefined);
  const { store } = await openConfiguredStore(cfg);
  const telemetry = new Telemetry(cfg.telemetry);
  // the control plane hears of degradation changes (events, audit), and exists after the data plane
  let degradationChanged: DegradationListener = () => undefined;
  const dp = new DataPlane(cfg.gateway, telemetry, { onDegradation: (m, c) => degradationChanged(m, c), adapterLoader: httpAdapterLoader });
  const cp = new ControlPlane(cfg, store, dp, opts.providers ?? new Providers());
  degradationChanged = (m, c) => cp.degradationChanged(m, c);
  const ports = controlPorts(cp);
  const controllers = buildControllers(cfg, ports, dp);
  let data: ListeningServer | undefined;
  let admin: ListeningServer | undefined;
  try {
    const adminTokenHint = await bootstrapTokens(store, cfg.auth.tokens, cfg.server.dataDir);
    await cp.boot(say);
    for (const m of cfg.models) dp.setAdmission(m.name, m.tiers, m.degradation);
    await cp.adapters.restore((why) => cp.events.emit({ kind: 'adapter_skipped', message: why }));
    await controllers.beforeServing();
    const d = parseHostPort(cfg.server.listen);
    data = await startListening(createDataServer(dp, { limits: cfg.limits.dataPlane }), d.host, d.port);
    const a = parseHostPort(cfg.server.adminListen);
    const auth = await Authenticator.load(store);
    admin = await startListening(createAdminServer({ cp, controllers }, auth, cfg.limits.admin), a.host, a.port);
    await controllers.run();
    const dataS = data;
    const adminS = admin;
    return {
      cfg,
      cp,
      ports,
      controllers,
      store,
      data: dataS,
      admin: adminS,
      dataUrl: dataS.url,
      adminUrl: adminS.url,
      adminTokenHint,
      async close(o = {}) {
        controllers.shutdown();
        await adminS.close();
        await dataS.close();
        await cp.shutdown(o.stopWorkers ?? true);
        await store.close();
      },
    };
  } catch (err) {
    controllers.shutdown();
    await admin?.close();
    await data?.close();
    await cp.shutdown(true).catch(() => undefined);
    await store.close();
    throw err;
  }
}
