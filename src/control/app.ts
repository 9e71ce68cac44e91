// The composition root: config → store → telemetry → data plane → providers → control plane → listeners.
import type { GlidepathConfig } from '../config/types.js';
import { Telemetry } from '../telemetry/telemetry.js';
import { DataPlane } from '../gateway/dataplane.js';
import { createDataServer, parseHostPort, startListening } from '../gateway/server.js';
import type { ListeningServer } from '../gateway/server.js';
import { Providers } from '../providers/index.js';
import { openStore } from '../store/sqlite.js';
import type { Store } from '../store/types.js';
import { Authenticator, bootstrapTokens } from '../api/auth.js';
import { createAdminServer } from '../api/server.js';
import type { ApiExtension } from '../api/extensions.js';
import { ControlPlane } from './plane.js';
import { monitorFeature } from '../rollout/monitor.js';
import { rolloutsFeature } from '../rollout/feature.js';

export interface App {
  cfg: GlidepathConfig;
  cp: ControlPlane;
  store: Store;
  data: ListeningServer;
  admin: ListeningServer;
  dataUrl: string;
  adminUrl: string;
  adminTokenHint: string;
  close(opts?: { stopWorkers?: boolean }): Promise<void>;
}

/** Feature modules register admin endpoints and background loops here (canary, experiments…). */
export interface Feature extends ApiExtension {
  start?(cp: ControlPlane): void | Promise<void>;
  stop?(): void | Promise<void>;
}

const features: Feature[] = [];
function registerFeature(f: Feature): void {
  if (!features.some((x) => x.name === f.name)) features.push(f);
}
// registered here, not by the module itself: a module that app.ts imports runs before `features` exists
registerFeature(monitorFeature);
registerFeature(rolloutsFeature);

export async function startGlidepath(cfg: GlidepathConfig, opts: { onProgress?: (m: string) => void; providers?: Providers } = {}): Promise<App> {
  const say = opts.onProgress ?? (() => undefined);
  const store = openStore(cfg.server.dataDir);
  const telemetry = new Telemetry(cfg.telemetry);
  const dp = new DataPlane(cfg.gateway, telemetry);
  const cp = new ControlPlane(cfg, store, dp, opts.providers ?? new Providers());
  let data: ListeningServer | undefined;
  let admin: ListeningServer | undefined;
  try {
    const adminTokenHint = bootstrapTokens(store, cfg.auth.tokens, cfg.server.dataDir);
    await cp.boot(say);
    const d = parseHostPort(cfg.server.listen);
    data = await startListening(createDataServer(dp, { limits: cfg.limits.dataPlane }), d.host, d.port);
    const a = parseHostPort(cfg.server.adminListen);
    const auth = new Authenticator(store);
    admin = await startListening(createAdminServer(cp, auth, features, cfg.limits.admin), a.host, a.port);
    for (const f of features) await f.start?.(cp);
    const dataS = data;
    const adminS = admin;
    return {
      cfg,
      cp,
      store,
      data: dataS,
      admin: adminS,
      dataUrl: dataS.url,
      adminUrl: adminS.url,
      adminTokenHint,
      async close(o = {}) {
        for (const f of features) await f.stop?.();
        await adminS.close();
        await dataS.close();
        await cp.shutdown(o.stopWorkers ?? true);
        store.close();
      },
    };
  } catch (err) {
    await admin?.close();
    await data?.close();
    await cp.shutdown(true).catch(() => undefined);
    store.close();
    throw err;
  }
}
