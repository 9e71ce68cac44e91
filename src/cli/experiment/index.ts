// `glidepath experiment create|status|analyze|stop`: A/B tests that say which version is better.
import type { Command } from 'commander';
import { choiceFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { UsageError, printJson, table } from '../output.js';
import type { ExperimentAnalysisView, ExperimentView } from '../../api/types.js';

/** What the text reads of an experiment. */
type Shown = Pick<ExperimentView, 'id' | 'model' | 'a' | 'b' | 'split' | 'metric' | 'phase' | 'stopped_reason' | 'result'>;

const num = (flag: string, v: string | undefined, lo: number, hi: number, open = true): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || (open ? n <= lo || n >= hi : n < lo || n > hi))
    throw new UsageError(`${flag} must be a number ${open ? 'strictly ' : ''}between ${lo} and ${hi}, got ${JSON.stringify(v)}`);
  return n;
};

type Num = number | null | undefined;
const known = (x: Num): x is number => typeof x === 'number' && Number.isFinite(x);

/** 4 significant digits, one decimal from 100 up; '-' when missing. */
function fmt(x: Num): string {
  if (!known(x)) return '-';
  return Math.abs(x) >= 100 ? x.toFixed(1) : Number(x.toPrecision(4)).toString();
}
/** Fixed decimals (effect sizes, probabilities, test statistics); '-' when missing. */
const fixed = (x: Num, digits: number): string => (known(x) ? x.toFixed(digits) : '-');
const signed = (x: Num, f: (x: Num) => string = fmt): string => (known(x) && x > 0 ? `+${f(x)}` : f(x));
/** p-values: two significant digits, and a floor instead of digits nobody reads. */
function fmtP(p: Num): string {
  if (!known(p)) return '-';
  return p < 1e-4 ? '< 0.0001' : Number(p.toPrecision(2)).toString();
}
const count = (n: Num): string => (known(n) ? String(Math.ceil(n)) : 'unknown');

/** The metric's unit, after a number. */
const unitOf = (metric: string): string => (metric === 'quality' ? '' : ' ms');

function decisionText(v: Shown, r: NonNullable<Shown['result']>): string {
  const better = v.metric === 'quality' ? 'higher' : 'lower';
  switch (r.decision) {
    case 'b_better':
      return `B (${v.b}) is better: ${better} ${v.metric}, significant at α ${fmt(r.alpha)}`;
    case 'a_better':
      return `A (${v.a}) is better: ${better} ${v.metric}, significant at α ${fmt(r.alpha)}`;
    case 'no_difference':
      return `no significant difference at α ${fmt(r.alpha)}`;
    default:
      return `not enough samples to analyse yet (${r.n_a} and ${r.n_b} so far)`;
  }
}

/** `experiment status|analyze` as text: both versions side by side, then the analysis line by line. */
export function renderExperiment(v: Shown): string {
  const lines = [
    `${v.id}  ${v.model}: A=${v.a} vs B=${v.b} on ${v.metric}, ${Math.round(v.split * 100)}% to B  ${v.phase.toUpperCase()}${v.stopped_reason ? ` (${v.stopped_reason})` : ''}`,
  ];
  const r = v.result;
  if (!r) {
    lines.push('no analysis yet: run `glidepath experiment analyze`');
    return lines.join('\n') + '\n';
  }
  const u = unitOf(v.metric);
  const head = ['', 'N', `MEAN${u}`, `MEDIAN${u}`, `STD${u}`];
  lines.push(
    table(head, [
      [`A ${v.a}`, r.n_a, fmt(r.mean_a), fmt(r.median_a), fmt(r.std_a)],
      [`B ${v.b}`, r.n_b, fmt(r.mean_b), fmt(r.median_b), fmt(r.std_b)],
    ]).trimEnd(),
    '',
  );
  const sequential = r.method === 'msprt';
  const more = known(r.additional_samples_needed) && r.additional_samples_needed <= 0 ? 'enough already' : `${count(r.additional_samples_needed)} more`;
  const samples: [string, string] = [
    'samples',
    `${count(sequential ? r.samples_needed_sequential : r.samples_needed_for_power)} per version to detect ${fmt(r.min_detectable_effect)}${u} with the configured power${sequential ? ` (${count(r.samples_needed_for_power)} for a single look)` : ''}: ${more}`,
  ];
  const rows: [string, string][] =
    r.status === 'insufficient_data'
      ? [['decision', decisionText(v, r)], samples]
      : [
          ['decision', decisionText(v, r)],
          [
            'p-value',
            sequential
              ? `${fmtP(r.p_value_sequential)} always-valid (mSPRT; ${fmtP(r.p_value)} for a single look)`
              : `${fmtP(r.p_value)} (Mann-Whitney, a single look)`,
          ],
          [
            'shift B − A',
            `${signed(r.hl_shift)}${u} [${fmt(r.hl_ci[0])}, ${fmt(r.hl_ci[1])}] (Hodges-Lehmann, ${known(r.hl_conf_level) ? Math.round(r.hl_conf_level * 100) : '-'} % interval)`,
          ],
          ['effect size', `d ${signed(r.effect_size, (x) => fixed(x, 2))} (Cohen's; seed 001's formula ${signed(r.effect_size_seed, (x) => fixed(x, 2))})`],
          ['win rate', `P(B > A) ${fixed(r.win_rate, 2)}`],
          ['Welch t-test', `t ${fixed(r.welch.t, 2)}, df ${fixed(r.welch.df, 0)}, p ${fmtP(r.welch.p)}`],
          samples,
        ];
  const width = Math.max(...rows.map(([k]) => k.length));
  for (const [k, val] of rows) lines.push(`${k.padEnd(width)}  ${val}`);
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
      .option('--min-effect <x>', "smallest difference worth detecting, in the metric's units (drives the samples-needed figure)")
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

  withCommon(exp.command('status').description('the running (or last) experiment').option('--id <id>', 'a past experiment'), { model: 'one' }).action(
    async (o: CommonOptions & { id?: string }) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const v = await s.client.get<ExperimentView>(modelPath(model, '/experiments'), o.id ? { id: o.id } : {});
      if (s.json) return printJson(v);
      out(renderExperiment(v));
    },
  );

  withCommon(exp.command('analyze').description('n, means, std, p-value, effect size, win rate, decision, samples still needed'), { model: 'one' }).action(
    async (o: CommonOptions) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const v = await s.client.post<ExperimentAnalysisView>(modelPath(model, '/experiments/analyze'), {});
      if (s.json) return printJson(v);
      out(renderExperiment(v));
    },
  );

  withCommon(
    exp
      .command('stop')
      .description('end the experiment: restore the previous route, or promote the winner')
      .option('--promote <a|b>', 'send all traffic to A or B and make it active'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { promote?: string }) => {
    const s = session(o);
    const promote = choiceFlag('--promote', o.promote, ['a', 'b'] as const);
    const model = await resolveModel(s, o.model);
    const v = await s.client.post<ExperimentView>(modelPath(model, '/experiments/stop'), promote ? { promote } : {});
    if (s.json) return printJson(v);
    out(`${v.id}: ${v.stopped_reason ?? v.phase}`);
  });
}
