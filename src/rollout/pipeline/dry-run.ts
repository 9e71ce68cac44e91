// What a pipeline would do, without doing it: the dry run's JSON and its human rendering
// (every stage and step with variables substituted, the trigger in its normalised form).
import { PIPELINE_DEFAULTS } from './defaults.js';
import { CLI_ALIASES, resolveArgv } from './exec.js';
import { redactUrl } from '../../http/url.js';
import { notifyTargets } from './rollback-notice.js';
import type { Command, Pipeline, Step } from './spec.js';
import { formatTrigger } from './trigger.js';
import { formatDuration, renderArgv } from './words.js';

export interface PlanCommand {
  command: string;
  argv: string[];
  /** What is spawned: `glidepath`/`dynamo` become this CLI under the current node. */
  exec: string[];
  /** on_failure commands carry their own timeout. */
  timeout?: string;
}
export type PlanStep =
  | ({ kind: 'run'; timeout: string; line: number | null } & PlanCommand)
  | { kind: 'wait_for'; condition: string; version: string | null; timeout: string; line: number | null }
  | { kind: 'monitor'; gates: string; for: string; every: string; until: string | null; version: string | null; line: number | null };

export interface Plan {
  dry_run: true;
  file: string;
  name: string | null;
  model: string | null;
  timeout: string;
  variables: { name: string; value: string | null; lines: number[] }[];
  stages: { name: string; timeout: string | null; steps: PlanStep[]; on_failure: PlanCommand[] }[];
  rollback: { trigger: string; written: string; action: PlanCommand | null; notify: { channel: string; webhooks: string[] } | null } | null;
}

function cmd(c: Command, cliPath?: string): PlanCommand {
  return { command: renderArgv(c.argv), argv: c.argv, exec: resolveArgv(c.argv, cliPath) };
}

function step(s: Step, cliPath?: string): PlanStep {
  const line = s.line ?? null;
  switch (s.kind) {
    case 'run':
      return { kind: 'run', ...cmd(s.command, cliPath), timeout: formatDuration(s.timeoutMs), line };
    case 'wait_for':
      return { kind: 'wait_for', condition: s.condition, version: s.version ?? null, timeout: formatDuration(s.timeoutMs), line };
    case 'monitor':
      return {
        kind: 'monitor',
        gates: 'health_gates',
        for: formatDuration(s.forMs),
        every: formatDuration(s.everyMs),
        until: s.until ?? null,
        version: s.version ?? null,
        line,
      };
  }
}

export function planOf(
  p: Pipeline,
  o: { model: string | undefined; env: Readonly<Record<string, string | undefined>>; notifyUrls?: readonly string[]; cliPath?: string },
): Plan {
  const rb = p.rollback;
  return {
    dry_run: true,
    file: p.source,
    name: p.name ?? null,
    model: o.model ?? null,
    timeout: formatDuration(p.timeoutMs),
    variables: p.variables.map((v) => ({ name: v.name, value: o.env[v.name] ?? null, lines: v.lines })),
    stages: p.stages.map((s) => ({
      name: s.name,
      timeout: s.timeoutMs === undefined ? null : formatDuration(s.timeoutMs),
      steps: s.steps.map((x) => step(x, o.cliPath)),
      on_failure: s.onFailure.map((c) => ({ ...cmd(c, o.cliPath), timeout: formatDuration(c.timeoutMs ?? PIPELINE_DEFAULTS.runTimeoutMs) })),
    })),
    rollback: rb
      ? {
          trigger: formatTrigger(rb.trigger),
          written: rb.triggerText,
          action: rb.action ? cmd(rb.action, o.cliPath) : null,
          notify: rb.notify === undefined ? null : { channel: rb.notify, webhooks: notifyTargets(rb.notify, o.notifyUrls ?? []).map(redactUrl) },
        }
      : null,
  };
}

export function renderPlan(plan: Plan): string {
  const out: string[] = [];
  const head = plan.name ? `pipeline ${plan.name} (${plan.file})` : `pipeline ${plan.file}`;
  out.push(`${head}: ${plan.stages.length} stage(s), timeout ${plan.timeout}${plan.model ? `, model ${plan.model}` : ''}`);
  for (const v of plan.variables)
    out.push(
      `  variable ${v.name} = ${v.value === null ? '(unset)' : JSON.stringify(v.value)}  (line${v.lines.length === 1 ? '' : 's'} ${v.lines.join(', ')})`,
    );
  const cmds: PlanCommand[] = plan.stages.flatMap((s) => [...s.steps.filter((x) => x.kind === 'run'), ...s.on_failure]);
  if (plan.rollback?.action) cmds.push(plan.rollback.action);
  const anyCli = cmds.find((x) => CLI_ALIASES.includes(x.argv[0] ?? ''));
  if (anyCli) out.push(`  ${CLI_ALIASES.join(' and ')} run this CLI: ${renderArgv(anyCli.exec.slice(0, 2))}`);
  const rb = plan.rollback;
  if (rb) {
    out.push(`rollback trigger: ${rb.trigger}`);
    out.push(
      `  when it fires during a monitor step: ${rb.action ? `run ${rb.action.command}` : 'no action'}${rb.notify ? `; notify ${rb.notify.channel} (${rb.notify.webhooks.length ? `POST ${rb.notify.webhooks.join(', ')}` : 'not sent: no webhook'})` : ''}; the pipeline stops with exit 1`,
    );
  }
  plan.stages.forEach((s, i) => {
    out.push(`stage ${i + 1}/${plan.stages.length}: ${s.name}${s.timeout ? ` (timeout ${s.timeout})` : ''}`);
    s.steps.forEach((x, j) => {
      const at = x.line === null ? '' : `  [line ${x.line}]`;
      if (x.kind === 'run') out.push(`  ${j + 1}. run ${x.command}  (timeout ${x.timeout})${at}`);
      else if (x.kind === 'wait_for')
        out.push(`  ${j + 1}. wait_for ${x.condition}${x.version ? ` of version ${x.version}` : ''}  (timeout ${x.timeout})${at}`);
      else if (x.until === null)
        out.push(`  ${j + 1}. monitor health_gates for ${x.for}, every ${x.every}: roll back when ${rb?.trigger ?? '(no trigger)'}${at}`);
      else
        out.push(
          `  ${j + 1}. monitor health_gates until ${x.until}${x.version ? ` of version ${x.version}` : ''} (at most ${x.for}), every ${x.every}: roll back when ${rb?.trigger ?? '(no trigger)'}${at}`,
        );
    });
    for (const c of s.on_failure) out.push(`  on failure: run ${c.command}  (timeout ${c.timeout ?? '?'})`);
  });
  out.push('dry run: nothing was executed');
  return `${out.join('\n')}\n`;
}
