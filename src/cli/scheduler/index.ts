// `glidepath scheduler status|plan`: the multi-model scheduler's view of every model (priority, replicas
// and their target, p99s against the SLO, rate, why it is left alone), its decisions with their reasons,
// who is short of GPUs, and (status) the decisions so far.
import type { Command } from 'commander';
import { out, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import type { RoundView, SchedulerView } from '../../api/routes/scheduler.js';

const ms = (x: number | null): string => (x === null ? '-' : `${Math.round(x)}`);
const vsSlo = (got: number | null, slo: number | null): string => (slo === null ? ms(got) : `${ms(got)}/${ms(slo)}`);

function printRound(r: RoundView): void {
  out(
    `${r.dry_run ? 'plan' : 'round'} at ${r.at}: ${r.free_gpus} GPU(s) free before, ${r.free_gpus_after} after` +
      (r.reserved_gpus > 0 ? ` (${r.reserved_gpus} more kept for health's replacements of dead workers)` : ''),
  );
  if (!r.measured) out('not measured: the scheduler is disabled, so no traffic is measured (p99s, rates, idle times are empty)');
  out(
    table(
      ['MODEL', 'PRIORITY', 'REPLICAS', 'TARGET', 'STARTING', 'MIN', 'MAX', 'GPUS/REPLICA', 'TTFT_P99/SLO', 'TPOT_P99/SLO', 'RPS', 'LEFT ALONE'],
      r.models.map((m) => [
        m.model,
        m.priority,
        String(m.replicas),
        m.target === m.replicas ? String(m.target) : `${m.target} (${m.target > m.replicas ? '+' : ''}${m.target - m.replicas})`,
        String(m.starting),
        String(m.min_replicas),
        String(m.max_replicas),
        String(m.gpus_per_replica),
        vsSlo(m.ttft_p99_ms, m.slo.ttft_p99_ms),
        vsSlo(m.tpot_p99_ms, m.slo.tpot_p99_ms),
        m.rps === null ? '-' : String(m.rps),
        m.frozen ?? '',
      ]),
    ),
  );
  if (r.decisions.length === 0) out('decisions: none');
  for (const d of r.decisions)
    out(
      `- ${d.action.replace('_', ' ')} ${d.model} ${d.from} → ${d.to}${d.below_min ? ' (BELOW ITS MIN)' : ''}: ${d.reason}${d.effect === null ? '' : `\n    expected: ${d.effect}`}`,
    );
  for (const s of r.short) out(`! ${s.model} wanted ${s.wanted}, has ${s.got}: ${s.reason}`);
}

type SwitchView = SchedulerView['time_sharing'][number]['history'][number];

function printGroup(g: SchedulerView['time_sharing'][number]): void {
  out(
    `time-share group ${g.group} (${g.models.join(', ')}): ${g.switching ? 'switching' : `${g.awake ?? 'nothing'} awake since ${g.awake_since ?? '-'}`}; ` +
      `a switch takes ~${g.expected_switch_ms} ms; ${g.cost.gpus_saved} GPU(s) saved against keeping all resident, ` +
      `${g.cost.switches_last_hour} switch(es) in the last hour (${g.cost.switching_ms_last_hour} ms switching)`,
  );
  for (const w of g.waiting) out(`  waiting: ${w.model}, ${w.held} request(s), the oldest for ${w.oldest_wait_ms} ms`);
  for (const b of g.backing_off) out(`  passed over: ${b.model} until ${b.until} (${b.failures} failed switch(es) in a row)`);
  if (g.decision !== null) out(`  decision: ${g.decision.kind}${g.decision.to === null ? '' : ` → ${g.decision.to}`}: ${g.decision.why}`);
  for (const s of g.history.slice(-10))
    out(
      `  ${s.at} ${s.from ?? '-'} → ${s.to}: ${s.outcome === 'done' ? `drain ${ms(s.drain_ms)} ms, sleep ${ms(s.sleep_ms)} ms, wake ${ms(s.wake_ms)} ms, ${s.total_ms} ms in all, ${s.released} released` : s.outcome} — ${s.why}`,
    );
}

export function register(program: Command): void {
  const sched = program
    .command('scheduler')
    .description('the multi-model scheduler: replicas by priority and SLO, preemption, every decision explained (docs/multi-model.md)');
  withCommon(sched.command('status').description("the scheduler's last round and its decisions so far")).action(async (o: CommonOptions) => {
    const s = session(o);
    const v = await s.client.get<SchedulerView>('/scheduler');
    if (s.json) return printJson(v);
    out(
      `scheduler: ${v.enabled ? (v.dry_run ? 'enabled, dry run (decides, changes nothing)' : 'enabled') : 'disabled (scheduler.enabled: false)'}, a round every ${v.interval_ms} ms`,
    );
    if (v.last_round === null) out('no round yet');
    else printRound(v.last_round);
    if (v.history.length > 0) {
      out('decisions so far (newest last):');
      for (const h of v.history.slice(-20))
        out(
          `  ${h.at} ${h.action.replace('_', ' ')} ${h.model}/${h.version} ${h.from} → ${h.to}: ${h.reason}; ${h.outcome}${h.gpus.length > 0 ? ` (GPUs ${h.gpus.join(', ')})` : ''}`,
        );
    }
    for (const g of v.time_sharing) printGroup(g);
  });
  withCommon(
    sched
      .command('turn')
      .argument('<group>', 'a time-share group')
      .argument('<model>', 'the member to give the GPUs to')
      .description("give a model of a time-share group the group's GPUs now (the awake one drained and put to sleep, it woken)"),
  ).action(async (group: string, model: string, o: CommonOptions) => {
    const s = session(o);
    const r = await s.client.post<SwitchView | null>(`/scheduler/time-sharing/${encodeURIComponent(group)}/turn`, { model });
    if (s.json) return printJson(r);
    if (r === null) return out(`${model} has the GPUs of ${group} already`);
    out(
      r.outcome === 'done'
        ? `${group}: ${r.from ?? 'nothing'} → ${r.to}: drain ${ms(r.drain_ms)} ms, sleep ${ms(r.sleep_ms)} ms, wake ${ms(r.wake_ms)} ms, ${r.total_ms} ms in all; ${r.released} request(s) released`
        : `${group}: the switch to ${r.to} ${r.outcome}; ${r.from ?? 'nothing'} keeps the GPUs`,
    );
  });
  withCommon(sched.command('plan').description('what a round would decide now, explained; nothing is changed')).action(async (o: CommonOptions) => {
    const s = session(o);
    const r = await s.client.get<RoundView>('/scheduler/plan');
    if (s.json) return printJson(r);
    printRound(r);
  });
}
