// Admin routes of cluster mode (docs/cluster.md): the followers' request records and the answers they
// sample for the LLM judge, shipped to the leader so that its canary judge, monitor, experiments and
// quality judge see every replica's traffic.
import { z } from 'zod';
import type { RequestRecord } from '../../telemetry/record.js';
import type { RouteDef } from '../router.js';
import { post } from '../router.js';
import type { AdminContext } from './context.js';

/** A time in ms: never negative (the judge's windows would read it as a fast request); NaN travels as null in JSON. */
const num = z
  .number()
  .min(0)
  .nullable()
  .transform((x) => (x === null ? NaN : x));
const name = z.string().min(1).max(256);

const recordSchema = z
  .object({
    model: name,
    version: name,
    // `<model>/<version>/<i>`: two names and a number
    worker: z.string().max(600),
    status: z.number().int().min(100).max(599),
    errorCode: z.string().max(128).optional(),
    stream: z.boolean(),
    ttftMs: num,
    queueMs: num,
    tpotMs: num,
    itlMs: z.array(z.number().min(0)).max(100_000),
    latencyMs: num,
    promptTokens: z.number().int().min(0),
    completionTokens: z.number().int().min(0),
    // epoch ms, as every record's
    at: z.number().min(0).max(8.64e15),
    retries: z.number().int().min(0),
    shadow: z.boolean(),
    adapter: name.optional(),
  })
  .strict();

const recordsBody = z.object({ replica: name, records: z.array(recordSchema).max(5_000) }).strict();

const text = z.string().max(64 * 1024);
const sampleSchema = z
  .object({
    model: name,
    version: name,
    adapter: name.optional(),
    pair: z.string().min(1).max(128).optional(),
    shadow: z.boolean(),
    prompt: text,
    answer: text,
  })
  .strict();

const samplesBody = z.object({ replica: name, samples: z.array(sampleSchema).max(2_000) }).strict();

export function clusterRoutes({ cp, controllers }: AdminContext): RouteDef[] {
  return [
    post(
      '/cluster/records',
      {
        role: 'operator',
        body: recordsBody,
        summary: "cluster mode: a follower's request records, judged with the leader's own (records of unknown versions are skipped)",
      },
      (_c, b) => {
        let accepted = 0;
        for (const r of b.records) {
          if (!cp.dp.models.get(r.model)?.pools.has(r.version)) continue;
          cp.dp.telemetry.ingest(r as RequestRecord);
          accepted++;
        }
        return { replica: b.replica, accepted, skipped: b.records.length - accepted };
      },
    ),
    post(
      '/cluster/judge-samples',
      {
        role: 'operator',
        body: samplesBody,
        summary:
          "cluster mode: answers a follower sampled for the LLM judge, judged with the leader's own (skipped without a `judge:` section, or of unknown versions)",
      },
      (_c, b) => {
        const judge = controllers.judge;
        let accepted = 0;
        for (const s of b.samples) {
          if (judge === undefined || !cp.dp.models.get(s.model)?.pools.has(s.version)) continue;
          if (judge.ingest(b.replica, s)) accepted++;
        }
        return { replica: b.replica, accepted, skipped: b.samples.length - accepted };
      },
    ),
  ];
}
