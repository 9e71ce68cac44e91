// `glidepath audit`: who changed what, when, with what result — newest first, with filters.
import type { Command } from 'commander';
import { choiceFlag, fmtMs, fmtTime, intFlag, out, session, textFlag, timeFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table, UsageError } from '../output.js';
import type { AuditView } from '../../api/types.js';

interface AuditOptions extends CommonOptions {
  since?: string;
  until?: string;
  actor?: string;
  action?: string;
  target?: string;
  result?: string;
  limit?: string;
}

function params(p: unknown): string {
  if (p === undefined || p === null) return '';
  const o = { ...(p as Record<string, unknown>) };
  delete o.model;
  const parts = Object.entries(o)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  const s = parts.join(' ');
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

export function register(program: Command): void {
  withCommon(
    program
      .command('audit')
      .description('the audit log of every change, newest first')
      .option('--since <time>', 'from (inclusive): epoch ms, ISO date, or a duration ago (30s, 15m, 2h, 7d)')
      .option('--until <time>', 'until (exclusive): same forms as --since')
      .option('--actor <name>', 'token name (or controller, config)')
      .option('--action <action>', 'e.g. deploy_green, swap, rollback, retire, register_version, set_route')
      .option('--target <target>', 'e.g. chat (swap, rollback) or chat/v2 (deploy, retire, register)')
      .option('--result <result>', 'ok or error')
      .option('--limit <n>', 'at most this many entries (default 100)'),
  ).action(async (o: AuditOptions) => {
    const s = session(o);
    const now = Date.now();
    const since = timeFlag('--since', o.since, now);
    const until = timeFlag('--until', o.until, now);
    if (since !== undefined && until !== undefined && since >= until) throw new UsageError('--since must be before --until');
    const q = {
      since,
      until,
      actor: textFlag('--actor', o.actor),
      action: textFlag('--action', o.action),
      target: textFlag('--target', o.target),
      result: choiceFlag('--result', o.result, ['ok', 'error'] as const),
      limit: intFlag('--limit', o.limit),
    };
    const entries = await s.client.get<AuditView[]>('/audit', q);
    if (s.json) return printJson(entries);
    if (entries.length === 0) return out('no audit entries match');
    out(
      table(
        ['AT', 'ACTOR', 'ACTION', 'TARGET', 'RESULT', 'DURATION', 'PARAMS'],
        entries.map((e) => [
          fmtTime(e.at),
          e.actor,
          e.action,
          e.target,
          e.result === 'ok' ? 'ok' : `error (${e.error_code ?? '?'})`,
          fmtMs(e.duration_ms ?? undefined),
          params(e.params),
        ]),
      ),
    );
  });
}
