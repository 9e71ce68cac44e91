// Admin routes: the version registry (list, one version with its history, register).
import { normalizeVersion } from '../../config/load.js';
import { versionSchema } from '../../config/schema.js';
import { kvCacheCompatible } from '../../domain/card.js';
import { BadRequestError, ForbiddenError } from '../../errors.js';
import { ROLE_RANK } from '../auth.js';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import type { VersionDetail } from '../types.js';
import { windowView } from '../rollout-views.js';
import { probeSetView, transitionView, versionView } from '../views.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

export function versionRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    get('/models/:model/versions', { role: 'viewer', summary: 'versions of a model' }, async (c) =>
      (await cp.registry.list(modelOf(cp, c))).map((v) => versionView(cp, v)),
    ),
    get(
      '/models/:model/versions/:version',
      { role: 'viewer', summary: 'one version with its transitions, active history and KV-cache compatibility with the active version' },
      async (c) => {
        const m = modelOf(cp, c);
        const v = await cp.version(m, c.params.version as string);
        const [active, transitions] = await Promise.all([cp.registry.active(m), cp.registry.transitions(m, v.id)]);
        const detail: VersionDetail = {
          ...versionView(cp, v),
          transitions: transitions.map(transitionView),
          probes: v.probes ? probeSetView(v.probes) : null,
          kv_cache_compatibility: active && active.id !== v.id ? { with: active.id, ...kvCacheCompatible(active, v) } : undefined,
          window: windowView(cp.dp.telemetry.stats(m, v.id)),
        };
        return detail;
      },
    ),
    post(
      '/models/:model/versions',
      {
        role: 'operator',
        body: versionSchema,
        summary: 'register a new version (body: one version as under models[].versions in glidepath.yaml); a process provider needs admin',
      },
      (c, b) => {
        const m = modelOf(cp, c);
        // a process provider runs a command on this host: only an admin may register one
        if (b.provider.kind === 'process' && ROLE_RANK[c.principal.role] < ROLE_RANK.admin) {
          throw new ForbiddenError(
            `token ${JSON.stringify(c.principal.name)} has role ${c.principal.role}; registering a version with a process provider (a command run on this host) needs admin`,
          );
        }
        const gpus = cp.inventory.total;
        if (b.provider.kind !== 'static' && b.tp > gpus)
          throw new BadRequestError('invalid_body', `tp: ${b.tp} needs more GPUs than the ${gpus} in the inventory`);
        const vc = normalizeVersion(m, b);
        return cp.exclusive(m, () =>
          cp.audited(actorOf(c), 'register_version', `${m}/${vc.id}`, { model: m, version: vc.id, card_checksum: vc.cardChecksum }, async () => {
            const v = await cp.registry.register(vc);
            cp.events.emit({ kind: 'version_registered', model: m, version: v.id, message: `${m}/${v.id} registered (card ${v.cardChecksum})` });
            return versionView(cp, v);
          }),
        );
      },
    ),
  ];
}
