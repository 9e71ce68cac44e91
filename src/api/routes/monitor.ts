// Admin routes: monitored rollback settings and state (GET, PUT with a runtime override).
import { z } from 'zod';
import { durationMs } from '../../config/schema-parts.js';
import { DEFAULTS } from '../../defaults.js';
import type { MonitorOverride } from '../../rollout/monitor.js';
import type { RouteDef } from '../router.js';
import { get, put } from '../router.js';
import { monitorCheckView, monitorSettingsView } from '../rollout-views.js';
import type { MonitorView } from '../types.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const putBody = z
  .object({
    enabled: z.boolean().optional(),
    max_error_rate: z.number().min(0).max(1).optional(),
    max_p99_latency_ms: z.number().positive().refine(Number.isFinite, 'expected a finite number').optional(),
    min_requests: z.number().int().min(0).optional(),
    // a day at most: past 2^31 - 1 ms a timer fires after 1 ms, and the monitor would look every ms
    interval_ms: durationMs(DEFAULTS.durations.maxIntervalMs).min(DEFAULTS.control.monitorMinIntervalMs).optional(),
    /** Drop the runtime override: back to the config's settings. */
    reset: z.boolean().optional(),
  })
  .strict();

async function monitorView({ controllers: { monitor, ports } }: AdminContext, model: string): Promise<MonitorView> {
  const ov = await monitor.override(model);
  const configured = monitor.configured(model);
  const last = monitor.lastCheck(model);
  return {
    model,
    settings: monitorSettingsView(await monitor.settings(model)),
    config: monitorSettingsView(configured),
    override: ov ? monitorSettingsView({ ...configured, ...ov }) : null,
    active: (await ports.versions.active(model))?.id ?? null,
    standby: (await ports.versions.standby(model))?.id ?? null,
    fired_for: monitor.firedFor(model) ?? null,
    last_check: last ? monitorCheckView(last) : null,
  };
}

export function monitorRoutes(ctx: AdminContext): RouteDef[] {
  const { cp } = ctx;
  const { monitor, ports } = ctx.controllers;
  return [
    get(
      '/models/:model/monitor',
      { role: 'viewer', summary: 'monitored rollback: effective settings (config + runtime override), armed state, last check' },
      (c) => monitorView(ctx, modelOf(cp, c)),
    ),
    put(
      '/models/:model/monitor',
      {
        role: 'operator',
        body: putBody,
        summary:
          'change monitored rollback settings at runtime (enabled, max_error_rate, max_p99_latency_ms, min_requests, interval_ms; reset: true drops the override)',
      },
      (c, b) => {
        const m = modelOf(cp, c);
        return ports.audited(actorOf(c), 'monitor_set', m, b, async () => {
          const patch: MonitorOverride = {};
          if (b.enabled !== undefined) patch.enabled = b.enabled;
          if (b.max_error_rate !== undefined) patch.maxErrorRate = b.max_error_rate;
          if (b.max_p99_latency_ms !== undefined) patch.maxP99LatencyMs = b.max_p99_latency_ms;
          if (b.min_requests !== undefined) patch.minRequests = b.min_requests;
          if (b.interval_ms !== undefined) patch.intervalMs = b.interval_ms;
          if (b.reset === true) await monitor.update(m, 'reset');
          if (Object.keys(patch).length > 0 || b.reset !== true) await monitor.update(m, patch);
          return monitorView(ctx, m);
        });
      },
    ),
  ];
}
