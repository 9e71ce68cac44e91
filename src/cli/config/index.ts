// `glidepath config check FILE`: validate a config and print every problem, or `ok`.
import type { Command } from 'commander';
import { loadConfigFile } from '../../config/load.js';
import { ConfigError } from '../../errors.js';
import { parseOutput, printJson } from '../output.js';

export function register(program: Command): void {
  const config = program.command('config').description('work with glidepath.yaml');
  config
    .command('check')
    .argument('<file>', 'path to glidepath.yaml')
    .option('-o, --output <format>', 'table or json', 'table')
    .description('validate a config file; exit 1 and list every problem when it is invalid')
    .action((file: string, opts: { output: string }) => {
      const fmt = parseOutput(opts.output);
      try {
        const cfg = loadConfigFile(file);
        if (fmt === 'json') printJson({ ok: true, models: cfg.models.map((m) => m.name) });
        else process.stdout.write('ok\n');
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        if (fmt === 'json') printJson({ ok: false, issues: err.issues });
        else process.stdout.write(`${err.message}\n`);
        process.exitCode = 1;
      }
    });
}
