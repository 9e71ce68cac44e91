// Admin routes: monitored rollback settings and state (GET, PUT with a runtime override).
import { z } from 'zod';
import { DEFAULTS } from '../../defaults.js';
import type { MonitorOverride, MonitorSettings } from '../../rollout/monitor.js';
import type { RouteDef } from '../router.js';
import { get, put } from '../router.js';
import type { AdminContext } from './context.js';
import { actorOf, modelOf } from './context.js';

const putBody = z
  .object({
    enabled: z.boolean().optional(),
    max_error_rate: z.number().min(0).max(1).optional(),
    max_p99_latency_ms: z.number().positive().refine(Number.isFinite, 'expected a finite number').optional(),
    min_requests: z.number().int().min(0).optional(),
    interval_ms: z.number().int().min(DEFAULTS.control.monitorMinIntervalMs).optional(),
    /** Drop the runtime override: back to the config's settings. */
    reset: z.boolean().optional(),
  })
  .strict();

function settingsView(s: MonitorSettings): Record<string, unknown> {
  return { enabled: s.enabled, max_error_rate: s.maxErrorRate, max_p99_latency_ms: s.maxP99LatencyMs, min_requests: s.minRequests, interval_ms: s.intervalMs };
}

async function monitorView({ controllers: { monitor, ports } }: AdminContext, model: string): Promise<Record<string, unknown>> {
  const ov = await monitor.override(model);
  const configured = monitor.configured(model);
  return {
    model,
    settings: settingsView(await monitor.settings(model)),
    config: settingsView(configured),
    override: ov ? settingsView({ ...configured, ...ov }) : null,
    active: (await ports.versions.active(model))?.id ?? null,
    standby: (await ports.versions.standby(model))?.id ?? null,
    fired_for: monitor.firedFor(model) ?? null,
    last_check: monitor.lastCheck(model) ?? null,
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
