// Admin routes: a model's LoRA adapters — list (with the workers that hold each), register, remove.
import { z } from 'zod';
import type { RouteDef } from '../router.js';
import { get, post } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const registerBody = z
  .object({ name: z.string().min(1).max(128), source: z.string().min(1).max(4_096), version: z.string().min(1).max(128).optional() })
  .strict();
const removeBody = z.object({ name: z.string().min(1).max(128) }).strict();

export function adapterRoutes({ cp }: AdminContext): RouteDef[] {
  return [
    get(
      '/models/:model/adapters',
      { role: 'viewer', summary: "the model's LoRA adapters: source, version, where they come from, and the workers that hold each" },
      (c) => cp.adapters.list(modelOf(cp, c)),
    ),
    post(
      '/models/:model/adapters',
      {
        role: 'operator',
        body: registerBody,
        summary: 'register a LoRA adapter (or a new source or version of one): requests naming it go to the model’s workers',
      },
      (c, b) => cp.adapters.register(modelOf(cp, c), b, actorOf(c)),
    ),
    post(
      '/models/:model/adapters/remove',
      { role: 'operator', body: removeBody, summary: 'remove an adapter registered through the API (one from the config is changed there)' },
      (c, b) => cp.adapters.remove(modelOf(cp, c), b.name, actorOf(c)),
    ),
  ];
}
