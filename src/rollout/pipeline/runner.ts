// Running a validated pipeline: stages in order, each step bounded by its own timeout, its stage's
// and the pipeline's; a failed step runs its stage's on_failure; a fired trigger runs the rollback.
import { setTimeout as sleep } from 'node:timers/promises';
import { renderArgv } from './words.js';
import { PIPELINE_DEFAULTS } from './defaults.js';
import { describeExit, execCommand, resolveArgv } from './exec.js';
import { notifyTargets, sendNotice } from './rollback-notice.js';
import type { NotifyResult, RollbackNotice } from './rollback-notice.js';
import { pollCondition, readStats } from './observe.js';
import type { AdminApi, Observed } from './observe.js';
import type { Command, Pipeline, Stage, Step } from './spec.js';
import { evaluateTrigger, formatTrigger } from './trigger.js';
import type { Evaluation } from './trigger.js';

export interface Reporter {
  /** Progress: stages and steps starting and ending. */
  info(line: string): void;
  /** One line of a command's output. */
  output(stage: string, line: string, stream: 'stdout' | 'stderr'): void;
}

export interface RunnerDeps {
  api: AdminApi;
  /** The model wait_for and monitor steps look at (resolved by the caller when the file needs one). */
  model: string | undefined;
  /** Environment of every command (the caller adds the variables and the admin API settings). */
  env: NodeJS.ProcessEnv;
  reporter: Reporter;
  cliPath?: string;
  pollMs?: number;
  /** Webhooks for rollback.notify (besides a URL written as its value). */
  notifyUrls?: readonly string[];
  /** Aborts the run (e.g. Ctrl-C): the current step stops and its stage's on_failure runs. */
  signal?: AbortSignal;
}

export interface StepResult {
  kind: Step['kind'] | 'on_failure' | 'rollback_action';
  what: string;
  status: 'ok' | 'failed';
  detail: string;
  durationMs: number;
}
export interface StageResult {
  name: string;
  status: 'ok' | 'failed' | 'not_run';
  steps: StepResult[];
  onFailure: StepResult[];
}
export interface RollbackRecord {
  stage: string;
  evaluation: Evaluation;
  versions: Observed['versions'];
  action: StepResult | undefined;
  notify: NotifyResult | undefined;
  notice: RollbackNotice | undefined;
}
export interface RunResult {
  ok: boolean;
  outcome: 'succeeded' | 'failed' | 'rolled_back';
  failedStage: string | undefined;
  reason: string | undefined;
  stages: StageResult[];
  rollback: RollbackRecord | undefined;
  durationMs: number;
}

/** A step's outcome inside the runner; `fired` when the rollback trigger fired during a monitor. */
type Outcome = { ok: boolean; detail: string; fired?: { evaluation: Evaluation; versions: Observed['versions'] } };

export function describeStep(s: Step): string {
  switch (s.kind) {
    case 'run':
      return `run ${renderArgv(s.command.argv)}`;
    case 'wait_for':
      return `wait_for ${s.condition}${s.version !== undefined ? ` (version ${s.version})` : ''}`;
    case 'monitor':
      return `monitor health_gates${s.until !== undefined ? ` until ${s.until}${s.version !== undefined ? ` (version ${s.version})` : ''}` : ''}`;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

export class PipelineRunner {
  private readonly pollMs: number;
  constructor(
    private readonly p: Pipeline,
    private readonly d: RunnerDeps,
  ) {
    this.pollMs = d.pollMs ?? PIPELINE_DEFAULTS.pollMs;
  }

  async run(): Promise<RunResult> {
    const start = Date.now();
    const total = AbortSignal.timeout(this.p.timeoutMs);
    const stages: StageResult[] = this.p.stages.map((s) => ({ name: s.name, status: 'not_run', steps: [], onFailure: [] }));
    const finish = (r: Omit<RunResult, 'stages' | 'durationMs'>): RunResult => ({ ...r, stages, durationMs: Date.now() - start });
    for (const [i, stage] of this.p.stages.entries()) {
      const res = stages[i] as StageResult;
      this.d.reporter.info(`==> stage ${i + 1}/${this.p.stages.length}: ${stage.name}`);
      const signals = [total, ...(this.d.signal ? [this.d.signal] : []), ...(stage.timeoutMs !== undefined ? [AbortSignal.timeout(stage.timeoutMs)] : [])];
      const signal = AbortSignal.any(signals);
      for (const step of stage.steps) {
        const what = describeStep(step);
        this.d.reporter.info(`  -> ${what}`);
        const t0 = Date.now();
        let out = await this.step(stage, step, signal);
        if (!out.ok && signal.aborted) {
          const why = total.aborted
            ? `pipeline timeout (${this.p.timeoutMs} ms) reached`
            : this.d.signal?.aborted
              ? 'interrupted'
              : `stage timeout (${stage.timeoutMs} ms) reached`;
          out = { ok: false, detail: `${why}: ${out.detail}` };
        }
        res.steps.push({ kind: step.kind, what, status: out.ok ? 'ok' : 'failed', detail: out.detail, durationMs: Date.now() - t0 });
        this.d.reporter.info(`     ${out.ok ? 'ok' : 'FAILED'}: ${out.detail}`);
        if (out.ok) continue;
        res.status = 'failed';
        if (out.fired && this.p.rollback) {
          const rb = await this.rollback(stage, out.fired);
          // the rollback action replaces the stage's on_failure (both usually roll back); without one, on_failure runs
          if (!this.p.rollback.action) res.onFailure = await this.onFailure(stage);
          return finish({
            ok: false,
            outcome: 'rolled_back',
            failedStage: stage.name,
            reason: `rollback trigger ${out.fired.evaluation.summary}`,
            rollback: rb,
          });
        }
        res.onFailure = await this.onFailure(stage);
        return finish({ ok: false, outcome: 'failed', failedStage: stage.name, reason: `${what}: ${out.detail}`, rollback: undefined });
      }
      res.status = 'ok';
    }
    return finish({ ok: true, outcome: 'succeeded', failedStage: undefined, reason: undefined, rollback: undefined });
  }

  private step(stage: Stage, step: Step, signal: AbortSignal): Promise<Outcome> {
    switch (step.kind) {
      case 'run':
        return this.exec(stage, step.command, step.timeoutMs, signal);
      case 'wait_for':
        return this.waitFor(step, signal);
      case 'monitor':
        return this.monitor(step, signal);
    }
  }

  private async exec(stage: Stage, cmd: Command, timeoutMs: number, signal: AbortSignal | undefined): Promise<Outcome> {
    const r = await execCommand(resolveArgv(cmd.argv, this.d.cliPath), {
      timeoutMs,
      env: this.d.env,
      signal,
      onLine: (line, stream) => this.d.reporter.output(stage.name, line, stream),
    });
    const ok = r.exitCode === 0 && !r.timedOut && !r.aborted && r.spawnError === undefined;
    return { ok, detail: `${describeExit(r, timeoutMs)} after ${r.durationMs} ms` };
  }

  private model(): string {
    if (this.d.model === undefined) throw new Error('no model to watch: pass --model or set pipeline.model');
    return this.d.model;
  }

  private api<T>(fn: () => Promise<T>, what: string): Promise<T> {
    return withTimeout(fn(), PIPELINE_DEFAULTS.apiTimeoutMs, what);
  }

  private async waitFor(step: Extract<Step, { kind: 'wait_for' }>, signal: AbortSignal): Promise<Outcome> {
    const deadline = Date.now() + step.timeoutMs;
    const version = step.version ?? this.d.env.VERSION;
    let failures = 0;
    let last = 'not checked yet';
    for (;;) {
      try {
        const poll = await this.api(() => pollCondition(this.d.api, this.model(), step.condition, version), 'admin API');
        failures = 0;
        if (poll.state === 'done') return { ok: true, detail: poll.detail };
        if (poll.state === 'failed') return { ok: false, detail: poll.detail };
        last = poll.detail;
      } catch (err) {
        last = (err as Error).message;
        if (++failures >= PIPELINE_DEFAULTS.maxApiFailures) return { ok: false, detail: `${failures} admin API calls in a row failed: ${last}` };
      }
      const left = deadline - Date.now();
      if (left <= 0) return { ok: false, detail: `${step.condition} not reached within ${step.timeoutMs} ms (last: ${last})` };
      try {
        await sleep(Math.min(this.pollMs, left), undefined, { signal });
      } catch {
        return { ok: false, detail: `stopped while waiting (last: ${last})` };
      }
    }
  }

  /**
   * Evaluate the trigger now and every `everyMs`. Without `until`, the gates must hold for `forMs`.
   * With `until`, the step ends when that condition holds (a failed condition fails the step, as
   * in wait_for), and `forMs` bounds the wait.
   */
  private async monitor(step: Extract<Step, { kind: 'monitor' }>, signal: AbortSignal): Promise<Outcome> {
    const trigger = this.p.rollback?.trigger;
    if (!trigger) return { ok: false, detail: 'no rollback.trigger to evaluate' };
    const version = step.version ?? this.d.env.VERSION;
    const start = Date.now();
    let next = start;
    let failures = 0;
    let checks = 0;
    let last = 'not evaluated';
    let waiting = '';
    for (;;) {
      try {
        const seen = await this.api(() => readStats(this.d.api, this.model()), 'admin API');
        checks++;
        const ev = evaluateTrigger(trigger, seen.stats);
        last = ev.summary;
        if (ev.fired) return { ok: false, detail: `trigger ${ev.summary}`, fired: { evaluation: ev, versions: seen.versions } };
        if (step.until !== undefined) {
          const until = step.until;
          const poll = await this.api(() => pollCondition(this.d.api, this.model(), until, version), 'admin API');
          if (poll.state === 'done') return { ok: true, detail: `${poll.detail}; health gates held (${checks} checks; last: ${last})` };
          if (poll.state === 'failed') return { ok: false, detail: poll.detail };
          waiting = poll.detail;
        }
        failures = 0;
      } catch (err) {
        last = (err as Error).message;
        if (++failures >= PIPELINE_DEFAULTS.maxApiFailures) return { ok: false, detail: `${failures} admin API calls in a row failed: ${last}` };
      }
      next += step.everyMs;
      if (next > start + step.forMs) break;
      try {
        await sleep(Math.max(0, next - Date.now()), undefined, { signal });
      } catch {
        return { ok: false, detail: `stopped while monitoring (last: ${last})` };
      }
    }
    if (step.until !== undefined) return { ok: false, detail: `${step.until} not reached within ${step.forMs} ms (last: ${waiting || last})` };
    return { ok: true, detail: `health gates held for ${step.forMs} ms (${checks} checks; last: ${last})` };
  }

  private async onFailure(stage: Stage): Promise<StepResult[]> {
    const out: StepResult[] = [];
    for (const cmd of stage.onFailure) {
      const what = `on_failure ${renderArgv(cmd.argv)}`;
      this.d.reporter.info(`  -> ${what}`);
      const t0 = Date.now();
      // not tied to the pipeline's signal: cleanup must run even after a timeout or an interrupt
      const r = await this.exec(stage, cmd, cmd.timeoutMs ?? PIPELINE_DEFAULTS.runTimeoutMs, undefined);
      this.d.reporter.info(`     ${r.ok ? 'ok' : 'FAILED'}: ${r.detail}`);
      out.push({ kind: 'on_failure', what, status: r.ok ? 'ok' : 'failed', detail: r.detail, durationMs: Date.now() - t0 });
    }
    return out;
  }

  private async rollback(stage: Stage, fired: NonNullable<Outcome['fired']>): Promise<RollbackRecord> {
    const rb = this.p.rollback as NonNullable<Pipeline['rollback']>;
    this.d.reporter.info(`==> rollback: ${formatTrigger(rb.trigger)} ${fired.evaluation.summary}`);
    let action: StepResult | undefined;
    if (rb.action) {
      const what = `rollback ${renderArgv(rb.action.argv)}`;
      this.d.reporter.info(`  -> ${what}`);
      const t0 = Date.now();
      const r = await this.exec(stage, rb.action, PIPELINE_DEFAULTS.runTimeoutMs, undefined);
      this.d.reporter.info(`     ${r.ok ? 'ok' : 'FAILED'}: ${r.detail}`);
      action = { kind: 'rollback_action', what, status: r.ok ? 'ok' : 'failed', detail: r.detail, durationMs: Date.now() - t0 };
    }
    let notify: NotifyResult | undefined;
    let notice: RollbackNotice | undefined;
    if (rb.notify !== undefined) {
      notice = {
        channel: rb.notify,
        pipeline: this.p.name,
        file: this.p.source,
        stage: stage.name,
        trigger: formatTrigger(rb.trigger),
        summary: fired.evaluation.summary,
        checks: fired.evaluation.checks,
        versions: fired.versions,
        action: action ? { command: renderArgv(rb.action?.argv ?? []), result: `${action.status}: ${action.detail}` } : null,
      };
      notify = await sendNotice(notifyTargets(rb.notify, this.d.notifyUrls ?? []), this.d.model, notice);
      this.d.reporter.info(`  -> ${notify.detail}`);
    }
    return { stage: stage.name, evaluation: fired.evaluation, versions: fired.versions, action, notify, notice };
  }
}

export function runPipeline(p: Pipeline, deps: RunnerDeps): Promise<RunResult> {
  return new PipelineRunner(p, deps).run();
}
