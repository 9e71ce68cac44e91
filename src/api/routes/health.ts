// Admin routes: worker health — a version's probe set (show, record again, pin one), and readmitting
// a worker that health took out (it must pass its probes again before it takes traffic).
import { z } from 'zod';
import type { ProbeSet } from '../../domain/probes.js';
import { BadRequestError } from '../../errors.js';
import type { RouteDef } from '../router.js';
import { get, noBody, post, put } from '../router.js';
import { probeSetView, workerHealthView } from '../views.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const pinBody = z
  .object({
    probes: z
      .array(
        z
          .object({
            prompt: z.string().min(1),
            max_tokens: z.number().int().positive(),
            tokens: z.array(z.string()).min(1),
            logprobs: z
              .array(z.object({ min: z.number(), max: z.number() }).strict())
              .nullable()
              .optional(),
          })
          .strict(),
      )
      .min(1),
  })
  .strict();

const readmitBody = z.object({ worker: z.string().min(1) }).strict();

export function healthRoutes({ cp, controllers }: AdminContext): RouteDef[] {
  const health = controllers.health;
  const target = (model: string, version: string) => `${model}/${version}`;
  return [
    get(
      '/models/:model/versions/:version/probes',
      { role: 'viewer', summary: "the version's probe set: prompts and what a healthy worker answers" },
      async (c) => {
        const m = modelOf(cp, c);
        const v = await cp.version(m, c.params.version as string);
        return v.probes ? probeSetView(v.probes) : null;
      },
    ),
    post(
      '/models/:model/versions/:version/probes/record',
      { role: 'operator', body: noBody, summary: "record the version's probe set again from its serving workers (majority, or the reference)" },
      async (c) => {
        const m = modelOf(cp, c);
        const id = (await cp.version(m, c.params.version as string)).id;
        return cp.audited(actorOf(c), 'probes.record', target(m, id), { model: m, version: id }, async () =>
          probeSetView(await health.probeSets.rerecord(m, id, actorOf(c))),
        );
      },
    ),
    put(
      '/models/:model/versions/:version/probes',
      { role: 'operator', body: pinBody, summary: 'pin a probe set: its workers are checked against these answers, never re-recorded by a deployment' },
      async (c, b) => {
        const m = modelOf(cp, c);
        const v = await cp.version(m, c.params.version as string);
        b.probes.forEach((p, i) => {
          if (p.logprobs && p.logprobs.length !== p.tokens.length)
            throw new BadRequestError(
              'invalid_body',
              `probes[${i}].logprobs: ${p.logprobs.length} range(s) for ${p.tokens.length} token(s); give one per token, or null`,
            );
        });
        const set: ProbeSet = {
          probes: b.probes.map((p) => ({ prompt: p.prompt, maxTokens: p.max_tokens, tokens: p.tokens, logprobs: p.logprobs ?? null })),
          basis: 'operator',
          recordedAt: Date.now(),
          from: [],
          pinned: true,
          skipped: [],
        };
        return cp.audited(actorOf(c), 'probes.pin', target(m, v.id), { model: m, version: v.id, prompts: set.probes.length }, async () =>
          probeSetView(await health.probeSets.pin(m, v.id, set)),
        );
      },
    ),
    post(
      '/workers/readmit',
      { role: 'operator', body: readmitBody, summary: 'readmit a worker health took out: it takes traffic again once its probes pass' },
      (c, b) => cp.audited(actorOf(c), 'worker.readmit', b.worker, { worker: b.worker }, () => Promise.resolve(workerHealthView(health.readmit(b.worker)))),
    ),
  ];
}
