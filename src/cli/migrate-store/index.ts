// `glidepath migrate-store --from sqlite --to etcd`: copy an embedded deployment's state (the SQLite file
// in the data directory) into the etcd cluster the config's `store:` names, then read it back to check.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { DEFAULTS } from '../../defaults.js';
import type { Command } from 'commander';
import { loadConfigFile } from '../../config/load.js';
import { dumpCounts } from '../../store/dump.js';
import { openConfiguredStore } from '../../store/open.js';
import { openStore } from '../../store/sqlite.js';
import { KvStore } from '../../store/kv/store.js';
import { err, out } from '../common.js';
import { parseOutput, printJson, UsageError } from '../output.js';

interface Options {
  config: string;
  from: string;
  to: string;
  dataDir?: string;
  output: string;
}

export function register(program: Command): void {
  program
    .command('migrate-store')
    .description("copy an embedded deployment's state (SQLite) into the etcd cluster the config's store: names; the target prefix must be empty")
    .option('-c, --config <file>', 'glidepath.yaml whose store: is the etcd target', 'glidepath.yaml')
    .option('--from <kind>', 'where the state is now: sqlite', 'sqlite')
    .option('--to <kind>', 'where it goes: etcd', 'etcd')
    .option('--data-dir <dir>', 'the SQLite data directory (default: server.data_dir of the config)')
    .option('-o, --output <format>', 'table or json', 'table')
    .action(async (o: Options) => {
      const fmt = parseOutput(o.output);
      if (o.from !== 'sqlite') throw new UsageError(`--from: only sqlite can be migrated from, got ${JSON.stringify(o.from)}`);
      if (o.to !== 'etcd') throw new UsageError(`--to: only etcd can be migrated to, got ${JSON.stringify(o.to)}`);
      const cfg = loadConfigFile(o.config);
      if (cfg.store.kind !== 'etcd')
        throw new UsageError(`${o.config}: store.kind is ${cfg.store.kind}; give it a store: {kind: etcd, endpoints: [...]} section to migrate into`);
      const dataDir = o.dataDir === undefined ? cfg.server.dataDir : path.resolve(o.dataDir);
      if (!existsSync(path.join(dataDir, DEFAULTS.store.fileName)))
        throw new UsageError(`no ${DEFAULTS.store.fileName} in ${dataDir}: nothing to migrate (--data-dir names the state directory)`);
      const source = openStore(dataDir);
      try {
        const dump = await source.dump();
        const { store } = await openConfiguredStore(cfg);
        try {
          if (!(store instanceof KvStore)) throw new UsageError('the target store is not a key-value store');
          if (fmt === 'table') err(`copying ${source.location} → ${store.location}`);
          const keys = await store.restore(dump, (done, total) => {
            if (fmt === 'table' && (done === total || done % 5_000 < 128)) err(`  ${done}/${total} keys`);
          });
          const back = dumpCounts(await store.dump());
          const want = dumpCounts(dump);
          const mismatched = Object.keys(want).filter((k) => want[k as keyof typeof want] !== back[k as keyof typeof back]);
          if (mismatched.length > 0) throw new Error(`read back from ${store.location}: different counts of ${mismatched.join(', ')}`);
          if (fmt === 'json') return printJson({ from: source.location, to: store.location, keys, records: want });
          out(`Copied ${source.location} to ${store.location}: ${keys} keys`);
          for (const [k, n] of Object.entries(want)) out(`  ${k.padEnd(12)} ${n}`);
          out('Read back: every count matches. Start the replicas with this config (docs/cluster.md).');
        } finally {
          await store.close();
        }
      } finally {
        await source.close();
      }
    });
}
