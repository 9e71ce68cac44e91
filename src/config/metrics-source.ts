// The `metrics_source:` section (docs/cluster.md): where the canary judge and the rollback monitor
// read their series — this process's windows (`local`, the default) or a Prometheus server that
// scrapes every gateway replica (`prometheus`) — its schema and its normalized form.
import { z } from 'zod';
import { DEFAULTS } from '../defaults.js';
import { durationMs, msg, posInt, show, str, url } from './schema-parts.js';

const D = DEFAULTS.metricsSource;

/** Labels Glidepath's own queries set, which an extra matcher may not set too. */
const RESERVED_LABELS = ['__name__', 'model', 'version', 'le', 'code', 'kind'];

/** Why a label name cannot be an extra matcher; undefined when it can. */
function badLabel(l: string): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(l)) return `expected a Prometheus label name, got ${show(l)}`;
  if (RESERVED_LABELS.includes(l)) return `label ${show(l)} is set by Glidepath's own queries (${RESERVED_LABELS.join(', ')})`;
  return undefined;
}

/** An environment variable's name: secrets are never written in the file. */
const envName = () => z.string(msg('an environment variable name')).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, msg('an environment variable name'));

export const metricsSourceSchema = z
  .discriminatedUnion(
    'kind',
    [
      z.object({ kind: z.literal('local') }).strict(),
      z
        .object({
          kind: z.literal('prometheus'),
          /** The server's base URL (its HTTP API is under /api/v1). */
          url: url(),
          timeout_ms: durationMs().default(D.timeoutMs),
          max_response_bytes: posInt().default(D.maxResponseBytes),
          monitor_window_ms: posInt().default(D.monitorWindowMs),
          max_window_ms: posInt().default(D.maxWindowMs),
          /** Extra label matchers on every series read, e.g. `{ job: glidepath }` where other jobs export the same names. */
          labels: z
            .record(z.string(), str('a label value'), msg('a mapping of label names to values'))
            .refine((labels) => Object.keys(labels).every((l) => badLabel(l) === undefined), {
              error: (iss) =>
                Object.keys(iss.input as Record<string, string>)
                  .flatMap((l) => badLabel(l) ?? [])
                  .join('; '),
            })
            .default({}),
          /** Environment variable holding a bearer token (never the token in the file). */
          bearer_token_env: envName().optional(),
          basic_auth: z
            .object({ username: str('a user name'), password_env: envName() })
            .strict()
            .optional(),
        })
        .strict()
        .refine((p) => p.bearer_token_env === undefined || p.basic_auth === undefined, {
          error: 'set bearer_token_env or basic_auth, not both',
          path: ['basic_auth'],
        }),
    ],
    {
      error: (iss: { input?: unknown }) =>
        `expected a metrics source kind of "local" or "prometheus", got ${show((iss.input as { kind?: unknown } | undefined)?.kind)}`,
    },
  )
  .default({ kind: 'local' });

type RawMetricsSource = z.output<typeof metricsSourceSchema>;

/** A Prometheus server the controllers read by PromQL. */
export interface PrometheusSourceConfig {
  readonly kind: 'prometheus';
  readonly url: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly monitorWindowMs: number;
  readonly maxWindowMs: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly bearerTokenEnv?: string | undefined;
  readonly basicAuth?: { readonly username: string; readonly passwordEnv: string } | undefined;
}

export type MetricsSourceConfig = { readonly kind: 'local' } | PrometheusSourceConfig;

export function normalizeMetricsSource(raw: RawMetricsSource): MetricsSourceConfig {
  if (raw.kind === 'local') return { kind: 'local' };
  return {
    kind: 'prometheus',
    url: raw.url.replace(/\/+$/, ''),
    timeoutMs: raw.timeout_ms,
    maxResponseBytes: raw.max_response_bytes,
    monitorWindowMs: raw.monitor_window_ms,
    maxWindowMs: raw.max_window_ms,
    labels: { ...raw.labels },
    bearerTokenEnv: raw.bearer_token_env,
    basicAuth: raw.basic_auth && { username: raw.basic_auth.username, passwordEnv: raw.basic_auth.password_env },
  };
}
