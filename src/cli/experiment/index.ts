// `glidepath experiment create|status|analyze|stop`: A/B tests that say which version is better.
import type { Command } from 'commander';
import { choiceFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { UsageError, printJson, table } from '../output.js';

interface ExperimentView {
  id: string;
  model: string;
  a: string;
  b: string;
  split: number;
  metric: string;
  phase: string;
  stoppedReason?: string;
  result?: Record<string, unknown> & { decision?: string; n_a: number; n_b: number; mean_a: number; mean_b: number; std_a: number; std_b: number; p_value: number; significant?: boolean };
}

const num = (flag: string, v: string | undefined, lo: number, hi: number, open = true): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || (open ? n <= lo || n >= hi : n < lo || n > hi)) throw new UsageError(`${flag} must be a number ${open ? 'strictly ' : ''}between ${lo} and ${hi}, got ${JSON.stringify(v)}`);
  return n;
};

function fmt(x: unknown): string {
  if (typeof x === 'number') return Number.isFinite(x) ? (Math.abs(x) >= 100 ? x.toFixed(1) : Number(x.toPrecision(4)).toString()) : '-';
  if (x === null || x === undefined) return '-';
  return typeof x === 'string' ? x : JSON.stringify(x);
}

function render(v: ExperimentView): string {
  const lines = [`${v.id}  ${v.model}: A=${v.a} vs B=${v.b} on ${v.metric}, ${Math.round(v.split * 100)}% to B  ${v.phase.toUpperCase()}${v.stoppedReason ? ` (${v.stoppedReason})` : ''}`];
  const r = v.result;
  if (r) {
    lines.push(
      table(
        ['', 'N', 'MEAN', 'STD'],
        [
          [`A ${v.a}`, r.n_a, fmt(r.mean_a), fmt(r.std_a)],
          [`B ${v.b}`, r.n_b, fmt(r.mean_b), fmt(r.std_b)],
        ],
      ).trimEnd(),
    );
    for (const k of Object.keys(r)) {
      if (['n_a', 'n_b', 'mean_a', 'mean_b', 'std_a', 'std_b', 'at', 'status'].includes(k)) continue;
      lines.push(`${k.padEnd(28)} ${fmt(r[k])}`);
    }
  } else {
    lines.push('no analysis yet: run `glidepath experiment analyze`');
  }
  return lines.join('\n') + '\n';
}

export function register(program: Command): void {
  const exp = program.command('experiment').description('A/B experiments: measure with confidence which of two versions is better');

  withCommon(
    exp
      .command('create')
      .description('split traffic (sticky per user) between two loaded versions and measure one metric')
      .requiredOption('--a <version>', 'version A (the baseline)')
      .requiredOption('--b <version>', 'version B')
      .option('--split <x>', 'share of traffic to B, strictly between 0 and 1 (default 0.5)')
      .requiredOption('--metric <name>', 'quality (LLM judge), ttft, tpot or latency')
      .option('--min-effect <x>', 'smallest difference worth detecting, in the metric\'s units (drives the samples-needed figure)')
      .option('--alpha <x>', 'significance level (default 0.05)')
      .option('--power <x>', 'power for the samples-needed figure (default 0.8)'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { a: string; b: string; split?: string; metric: string; minEffect?: string; alpha?: string; power?: string }) => {
    const s = session(o);
    const metric = choiceFlag('--metric', o.metric, ['quality', 'ttft', 'tpot', 'latency'] as const) as string;
    const body = {
      a: textFlag('--a', o.a),
      b: textFlag('--b', o.b),
      metric,
      ...(o.split !== undefined ? { split: num('--split', o.split, 0, 1) } : {}),
      ...(o.minEffect !== undefined ? { min_detectable_effect: num('--min-effect', o.minEffect, 0, Infinity) } : {}),
      ...(o.alpha !== undefined ? { alpha: num('--alpha', o.alpha, 0, 0.5) } : {}),
      ...(o.power !== undefined ? { power: num('--power', o.power, 0, 1) } : {}),
    };
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<ExperimentView>(modelPath(model, '/experiments'), body);
    if (s.json) return printJson(v);
    out(`Started ${v.id}: A=${v.a} vs B=${v.b} on ${v.metric}; analyse with \`glidepath experiment analyze --model ${model}\``);
  });

  withCommon(exp.command('status').description('the running (or last) experiment').option('--id <id>', 'a past experiment'), { model: 'one' }).action(async (o: CommonOptions & { id?: string }) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const v = await s.client.get<ExperimentView>(modelPath(model, '/experiments'), o.id ? { id: o.id } : {});
    if (s.json) return printJson(v);
    out(render(v));
  });

  withCommon(exp.command('analyze').description('n, means, std, p-value, effect size, win rate, decision, samples still needed'), { model: 'one' }).action(async (o: CommonOptions) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<ExperimentView>(modelPath(model, '/experiments/analyze'), {});
    if (s.json) return printJson(v);
    out(render(v));
  });

  withCommon(exp.command('stop').description('end the experiment: restore the previous route, or promote the winner').option('--promote <a|b>', 'send all traffic to A or B and make it active'), { model: 'one' }).action(
    async (o: CommonOptions & { promote?: string }) => {
      const s = session(o);
      const promote = choiceFlag('--promote', o.promote, ['a', 'b'] as const);
      const model = await resolveModel(s, o.model);
      const v = await s.client.post<ExperimentView>(modelPath(model, '/experiments/stop'), promote ? { promote } : {});
      if (s.json) return printJson(v);
      out(`${v.id}: ${v.stoppedReason ?? v.phase}`);
    },
  );
}
