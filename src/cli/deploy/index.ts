// `glidepath deploy green --version V`: load a version beside the active one, warm it, mark it ready,
// showing the loading progress as it streams from the admin API.
import type { Command } from 'commander';
import { err, fmtGpus, fmtMs, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson } from '../output.js';
import type { VersionView } from '../../api/types.js';

export function register(program: Command): void {
  const deploy = program.command('deploy').description('load a new version beside the serving one');
  withCommon(
    deploy
      .command('green')
      .description('load a version on free GPUs while the active (blue) keeps serving, warm it up, mark it ready')
      .requiredOption('--version <version>', 'the registered version to load')
      .option('--quiet', 'no progress lines'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { version: string; quiet?: boolean }) => {
    const s = session(o);
    const id = textFlag('--version', o.version) as string; // a required option: commander refuses a missing one
    const model = await resolveModel(s, o.model);
    const t0 = Date.now();
    // progress goes to stderr so stdout stays the result (a table line or JSON)
    const v = await s.client.stream<VersionView>(modelPath(model, '/deploy'), { version: id }, (p) => {
      if (o.quiet) return;
      const m = (p as { message?: unknown } | undefined)?.message;
      err(`  [${((Date.now() - t0) / 1000).toFixed(1)}s] ${typeof m === 'string' ? m : JSON.stringify(p)}`);
    });
    if (s.json) return printJson(v);
    out(
      `Green ready: ${v.model}/${v.version} loaded in ${fmtMs(v.load_time_ms)} on ${fmtGpus(v.gpus)} (not serving yet; \`glidepath swap --confirm\` makes it active)`,
    );
  });
}
