// `glidepath swap`: make the ready (green) version active; blue becomes the standby. It moves live
// traffic, so it asks first on a terminal and needs --confirm anywhere else (scripts, CI).
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { choiceFlag, fmtMs, msFlag, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions, Session } from '../common.js';
import { printJson, UsageError } from '../output.js';
import type { SwapView, VersionView } from '../../api/types.js';

interface SwapOptions extends CommonOptions {
  to?: string;
  mode?: string;
  drainTimeout?: string;
  standby?: string;
  confirm?: boolean;
}

/** Refused (exit 1) when the operator answers no: nothing changed. */
export class NotConfirmedError extends Error {
  constructor() {
    super('swap not confirmed; nothing changed');
  }
}

async function describe(s: Session, model: string, to: string | undefined): Promise<string> {
  const vs = await s.client.get<VersionView[]>(modelPath(model, '/versions'));
  const active = vs.find((v) => v.status === 'active')?.version ?? '(none)';
  const target =
    to ??
    vs
      .filter((v) => v.status === 'ready')
      .map((v) => v.version)
      .join(' or ');
  return `${model}: ${active} → ${target || '(no ready version)'}`;
}

async function ask(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const a = await rl.question(question);
    return /^y(es)?$/i.test(a.trim());
  } finally {
    rl.close();
  }
}

export function register(program: Command): void {
  withCommon(
    program
      .command('swap')
      .description('make the ready (green) version active; the active one becomes the standby for instant rollback')
      .option('--to <version>', 'the version to make active (default: the one ready version)')
      .option(
        '--mode <mode>',
        'overlap (blue finishes its in-flight requests while green takes new ones) or drain-first (new requests wait until blue has drained)',
        'overlap',
      )
      .option('--drain-timeout <ms>', 'drain-first: abort what is still running on blue after this long (default from the config, 30000)')
      .option('--standby <mode>', 'warm (keep blue on its GPUs) or sleep (time-shared: weights to CPU memory; rollback wakes it first)', 'warm')
      .option('--confirm', 'do it without asking (required when not on a terminal)'),
    { model: 'one' },
  ).action(async (o: SwapOptions) => {
    const s = session(o);
    const body = {
      to: textFlag('--to', o.to),
      mode: choiceFlag('--mode', o.mode, ['overlap', 'drain-first'] as const),
      drain_timeout_ms: msFlag('--drain-timeout', o.drainTimeout),
      standby: choiceFlag('--standby', o.standby, ['warm', 'sleep'] as const),
      confirm: true,
    };
    if (body.drain_timeout_ms !== undefined && body.mode !== 'drain-first') throw new UsageError('--drain-timeout only applies to --mode drain-first');
    const interactive = process.stdin.isTTY === true && process.stderr.isTTY === true;
    if (!o.confirm && !interactive) {
      throw new UsageError('swap moves live traffic: pass --confirm to run it without a terminal (nothing changed)');
    }
    const model = await resolveModel(s, o.model);
    if (!o.confirm) {
      const what = await describe(s, model, body.to);
      if (!(await ask(`Swap ${what} (${body.mode})? [y/N] `))) throw new NotConfirmedError();
    }
    const r = await s.client.post<SwapView>(modelPath(model, '/swap'), body, { long: true });
    if (s.json) return printJson(r);
    out(`Swapped ${r.model}: ${r.from ?? '(none)'} → ${r.to} (${r.mode}); route switch ${fmtMs(r.switch_ms)}, total ${fmtMs(r.total_ms)}`);
    if (r.held_ms !== undefined) out(`New requests held ${fmtMs(r.held_ms)} while ${r.from ?? 'blue'} drained`);
    if (r.drain)
      out(
        `Drain: ${r.drain.drained} in-flight request(s) finished${r.drain.aborted ? `, ${r.drain.aborted} ABORTED after the timeout` : ''} in ${fmtMs(r.drain.elapsed_ms)}`,
      );
    if (r.from)
      out(
        `${r.from} is now the standby (${r.standby === 'sleep' ? 'asleep: weights in CPU memory, rollback wakes it first' : 'warm'}): \`glidepath rollback --instant\` goes back`,
      );
  });
}
