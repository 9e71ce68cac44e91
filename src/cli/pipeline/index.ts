// `glidepath pipeline run FILE` and `glidepath pipeline check FILE`: deployment.yaml pipelines
// (seed 000) — validate, dry-run, or run them against the admin API. Exit 0 / 1 failed / 2 invalid.
import type { Command } from 'commander';
import { pipelineRunView } from '../../api/rollout-views.js';
import { loadConfigFile } from '../../config/load.js';
import { ConfigError } from '../../errors.js';
import { PIPELINE_DEFAULTS } from '../../rollout/pipeline/defaults.js';
import { planOf, renderPlan } from '../../rollout/pipeline/dry-run.js';
import { runPipeline } from '../../rollout/pipeline/runner.js';
import type { Reporter, RunResult } from '../../rollout/pipeline/runner.js';
import { loadPipelineFile } from '../../rollout/pipeline/spec.js';
import type { Pipeline } from '../../rollout/pipeline/spec.js';
import { formatDuration } from '../../rollout/pipeline/words.js';
import { durationFlag, resolveModel, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { EXIT, UsageError, parseOutput, printJson } from '../output.js';

interface RunOptions extends CommonOptions {
  var?: string[];
  dryRun?: boolean;
  notifyUrl?: string[];
  config?: string;
  poll?: string;
  timeout?: string;
}

function collect(v: string, prev: string[] | undefined): string[] {
  return [...(prev ?? []), v];
}

function parseVars(list: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of list) {
    const i = kv.indexOf('=');
    const name = i < 0 ? kv : kv.slice(0, i);
    if (i < 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new UsageError(`--var: expected NAME=value with NAME made of letters, digits and _, got ${JSON.stringify(kv)}`);
    out[name] = kv.slice(i + 1);
  }
  return out;
}

/** Load the file; an invalid one prints every problem and sets exit 2. */
function load(file: string, vars: Record<string, string>, json: boolean, requireVars: boolean): Pipeline | undefined {
  try {
    return loadPipelineFile(file, { vars, env: process.env, requireVars });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    if (json) printJson({ ok: false, file, issues: err.issues });
    else process.stderr.write(`${err.message}\n`);
    process.exitCode = EXIT.usage;
    return undefined;
  }
}

const needsModel = (p: Pipeline): boolean => p.stages.some((s) => s.steps.some((x) => x.kind !== 'run'));

function printResult(r: RunResult): void {
  const failed = r.stages.find((s) => s.status === 'failed');
  const line =
    r.outcome === 'succeeded'
      ? `pipeline succeeded: ${r.stages.length} stage(s) in ${r.durationMs} ms`
      : `pipeline ${r.outcome === 'rolled_back' ? 'rolled back' : 'failed'} in stage ${failed?.name ?? '?'}: ${r.reason ?? ''}`;
  process.stdout.write(`${line}\n`);
}

async function run(file: string, o: RunOptions): Promise<void> {
  const output = parseOutput(o.output);
  const json = output === 'json';
  const vars = parseVars(o.var ?? []);
  const pollMs = durationFlag('--poll', o.poll);
  const timeoutMs = durationFlag('--timeout', o.timeout);
  for (const u of o.notifyUrl ?? []) if (!/^https?:\/\/\S+$/i.test(u)) throw new UsageError(`--notify-url: expected an http(s) URL, got ${JSON.stringify(u)}`);
  const p = load(file, vars, json, true);
  if (!p) return;
  const notifyUrls = [...(o.notifyUrl ?? [])];
  if (o.config !== undefined) {
    try {
      notifyUrls.push(...loadConfigFile(o.config).notifications.webhooks);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      process.stderr.write(`--config: ${err.message}\n`);
      process.exitCode = EXIT.usage;
      return;
    }
  }
  if (timeoutMs !== undefined) p.timeoutMs = timeoutMs;
  const env: NodeJS.ProcessEnv = { ...process.env, ...vars };
  if (o.dryRun) {
    const plan = planOf(p, { model: o.model ?? p.model, env, notifyUrls });
    if (json) printJson(plan);
    else process.stdout.write(renderPlan(plan));
    return;
  }
  const s = session(o);
  const model = o.model ?? p.model ?? (needsModel(p) ? await resolveModel(s, undefined) : undefined);
  // commands that call glidepath reach the same API as this run
  env.GLIDEPATH_URL = s.client.baseUrl;
  if (o.token !== undefined) env.GLIDEPATH_TOKEN = o.token;
  if (o.dataDir !== undefined) env.GLIDEPATH_DATA_DIR = o.dataDir;
  const reporter: Reporter = {
    info: (line) => (json ? process.stderr : process.stdout).write(`${line}\n`),
    output: (stage, line, stream) => (json || stream === 'stderr' ? process.stderr : process.stdout).write(`     [${stage}] ${line}\n`),
  };
  const interrupt = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    // the first Ctrl-C stops the current step and runs its stage's on_failure; the second exits
    if (++interrupts > 1) process.exit(130);
    process.stderr.write('interrupted: stopping the current step (Ctrl-C again to exit at once)\n');
    interrupt.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const r = await runPipeline(p, { api: s.client, model, env, reporter, pollMs, notifyUrls, signal: interrupt.signal });
    if (json) printJson(pipelineRunView(file, model, r));
    else printResult(r);
    process.exitCode = r.ok ? EXIT.ok : EXIT.refused;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

function check(file: string, o: { output: string; var?: string[] }): void {
  const json = parseOutput(o.output) === 'json';
  const vars = parseVars(o.var ?? []);
  const p = load(file, vars, json, false);
  if (!p) return;
  const unset = p.variables.filter((v) => !v.set);
  if (json) {
    printJson({ ok: true, file, stages: p.stages.map((s) => s.name), variables: p.variables, unset: unset.map((v) => v.name) });
    return;
  }
  process.stdout.write(`ok: ${p.stages.length} stage(s): ${p.stages.map((s) => s.name).join(', ')}\n`);
  if (unset.length > 0) {
    process.stdout.write(
      `variables to give with --var NAME=value (or the environment) when running: ${unset.map((v) => `${v.name} (line${v.lines.length === 1 ? '' : 's'} ${v.lines.join(', ')})`).join(', ')}\n`,
    );
  }
}

export function register(program: Command): void {
  const pipeline = program.command('pipeline').description('deployment pipelines (deployment.yaml): check, dry-run, run');
  withCommon(
    pipeline
      .command('run')
      .argument('<file>', 'the pipeline file (deployment.yaml)')
      .description('run the stages in order; exit 0 on success, 1 when a step failed or the rollback trigger fired, 2 when the file is invalid')
      .option('--dry-run', 'print what would happen and execute nothing')
      .option('--var <NAME=value>', 'set a variable used as $NAME or ${NAME} (repeatable; wins over the environment)', collect)
      .option('--notify-url <url>', 'a webhook for rollback.notify (repeatable; a URL written as rollback.notify is used too)', collect)
      .option('-c, --config <file>', "also notify the webhooks of this glidepath.yaml's notifications.webhooks")
      .option('--poll <duration>', `how often wait_for polls the admin API (default ${formatDuration(PIPELINE_DEFAULTS.pollMs)})`)
      .option('--timeout <duration>', 'bound on the whole run (overrides pipeline.timeout; default 2h)'),
    { model: 'one' },
  ).action((file: string, o: RunOptions) => run(file, o));
  pipeline
    .command('check')
    .argument('<file>', 'the pipeline file (deployment.yaml)')
    .description('validate a pipeline file and list every problem with its line; exit 2 when it is invalid')
    .option('--var <NAME=value>', 'set a variable (repeatable); unset variables are listed, not errors', collect)
    .option('-o, --output <format>', 'table or json', 'table')
    .action((file: string, o: { output: string; var?: string[] }) => check(file, o));
}
