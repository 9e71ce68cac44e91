// What ships in deploy/: the Prometheus alert rules (checked and unit-tested with promtool) and the
// Grafana dashboard, whose every PromQL expression must name metrics the gateway exports and parse.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { GatewayMetrics } from '../../../src/telemetry/metrics.js';
import { OPTIONAL_TOOLS, findTool, itWithTool } from '../../helpers/tools.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const PROM = path.join(ROOT, 'deploy/prometheus');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/glidepath.json');

interface Dashboard {
  panels: { type: string; title: string; datasource?: { uid: string }; targets?: { expr: string; refId: string }[] }[];
  templating: { list: { name: string; query: unknown }[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
const panelExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
const rules = (parse(readFileSync(path.join(PROM, 'alerts.yaml'), 'utf8')) as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap(
  (g) => g.rules,
);

/** Every series name the gateway's /metrics can carry: its families, and a histogram's _bucket/_sum/_count. */
async function exported(): Promise<Set<string>> {
  const m = new GatewayMetrics();
  const names = new Set<string>();
  for (const f of await m.registry.getMetricsAsJSON()) {
    names.add(f.name);
    if (String(f.type) === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(f.name + s);
  }
  return names;
}

/** The metric names in a PromQL expression (ours all start glidepath_). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\bglidepath_[a-z0-9_]+\b/g)].map((x) => x[0]);
}

describe('deploy/: alert rules and the Grafana dashboard', () => {
  it('the dashboard covers routes, canary verdicts, latency by version, worker health and breakers', () => {
    const all = panelExprs.map((p) => p.expr).join('\n');
    for (const m of [
      'glidepath_route_weight',
      'glidepath_canary_verdicts_total',
      'glidepath_request_duration_seconds_bucket',
      'glidepath_worker_health_state',
      'glidepath_worker_breaker_state',
    ])
      expect(all).toContain(m);
    for (const p of dashboard.panels.filter((x) => x.type !== 'row')) expect(p.datasource?.uid, p.title).toBe('${datasource}');
  });

  it('every PromQL expression of the dashboard and of the alert rules names only metrics the gateway exports', async () => {
    const names = await exported();
    const queries = [
      ...panelExprs.map((p) => ({ where: `panel ${JSON.stringify(p.panel)}`, expr: p.expr })),
      ...rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
      ...dashboard.templating.list
        .filter((v) => typeof v.query === 'object')
        .map((v) => ({ where: `variable ${v.name}`, expr: (v.query as { query: string }).query })),
    ];
    expect(queries.length).toBeGreaterThan(20);
    const unknown = queries.flatMap((q) =>
      metricNames(q.expr)
        .filter((n) => !names.has(n))
        .map((n) => `${q.where}: ${n}`),
    );
    expect(unknown).toEqual([]);
  });

  itWithTool('promtool', OPTIONAL_TOOLS.promtool)('promtool check rules and promtool test rules pass on the alerts', () => {
    const promtool = findTool('promtool') as string;
    expect(execFileSync(promtool, ['check', 'rules', 'alerts.yaml'], { cwd: PROM, encoding: 'utf8' })).toMatch(/SUCCESS: 6 rules found/);
    expect(execFileSync(promtool, ['test', 'rules', 'alerts.test.yaml'], { cwd: PROM, encoding: 'utf8' })).toMatch(/SUCCESS/);
  });

  itWithTool('promtool', OPTIONAL_TOOLS.promtool)("every dashboard expression is valid PromQL (promtool parses it as a recording rule's)", () => {
    const promtool = findTool('promtool') as string;
    const dir = mkdtempSync(path.join(tmpdir(), 'gp-dash-'));
    try {
      const file = path.join(dir, 'dashboard-rules.yaml');
      const recorded = panelExprs.map(
        (p, i) => `      - record: glidepath:dashboard:panel_${i}\n        expr: ${JSON.stringify(p.expr.replaceAll('$model', '.*'))}`,
      );
      writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${recorded.join('\n')}\n`);
      expect(execFileSync(promtool, ['check', 'rules', file], { encoding: 'utf8' })).toMatch(new RegExp(`SUCCESS: ${panelExprs.length} rules found`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
