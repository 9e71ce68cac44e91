// `glidepath adapter register|list|remove`: a model's LoRA adapters — requests naming one go to the
// model's workers, which load it on demand (docs/multi-model.md).
import type { Command } from 'commander';
import { modelPath, out, resolveModel, session, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson, table } from '../output.js';
import type { AdapterView } from '../../control/adapters.js';
import { registerCanary } from './canary.js';

export function register(program: Command): void {
  const cmd = program.command('adapter').description("a model's LoRA adapters: served on its workers under their own names, loaded on demand");
  withCommon(cmd.command('list').description('the adapters of a model and the workers that hold each'), { model: 'one' }).action(async (o: CommonOptions) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const list = await s.client.get<AdapterView[]>(modelPath(model, '/adapters'));
    if (s.json) return printJson(list);
    if (list.length === 0) return out(`${model} has no adapters`);
    out(
      table(
        ['ADAPTER', 'SOURCE', 'VERSION', 'FROM', 'CANARY', 'ON_WORKERS'],
        list.map((a) => [
          a.served_as === a.name ? a.name : `${a.name} (as ${a.served_as})`,
          a.source,
          a.version ?? '-',
          a.from,
          a.canary === null ? '-' : `${a.canary.version ?? a.canary.source} at ${Math.round(a.canary.share * 100)}%`,
          a.workers
            .map(
              (w) =>
                `${w.worker}${w.served_as === a.served_as ? '' : ` (${w.served_as})`}${w.loaded ? '' : ' (loading)'}${w.in_use > 0 ? ` ×${w.in_use}` : ''}`,
            )
            .join(', ') || '-',
        ]),
      ),
    );
  });
  withCommon(
    cmd
      .command('register <name> <source>')
      .description('register an adapter (or a new source or version of one)')
      .option('--adapter-version <v>', 'its version'),
    {
      model: 'one',
    },
  ).action(async (name: string, source: string, o: CommonOptions & { adapterVersion?: string }) => {
    const s = session(o);
    const model = await resolveModel(s, o.model);
    const a = await s.client.post<AdapterView>(modelPath(model, '/adapters'), { name, source, version: o.adapterVersion });
    if (s.json) return printJson(a);
    out(
      `registered ${a.name} on ${model} (${a.source}${a.version === null ? '' : `, version ${a.version}`}): requests with "model": "${a.name}" go to ${model}'s workers`,
    );
  });
  withCommon(cmd.command('remove <name>').description('remove an adapter registered through the API'), { model: 'one' }).action(
    async (name: string, o: CommonOptions) => {
      const s = session(o);
      const model = await resolveModel(s, o.model);
      const r = await s.client.post<{ removed: string }>(modelPath(model, '/adapters/remove'), { name });
      if (s.json) return printJson(r);
      out(`removed ${r.removed} from ${model}`);
    },
  );
  registerCanary(cmd);
}
