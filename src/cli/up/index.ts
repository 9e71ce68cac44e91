// `glidepath up`: start the gateway and the control plane (and the simulated fleet the config names).
import path from 'node:path';
import type { Command } from 'commander';
import { DEFAULTS } from '../../defaults.js';
import { loadConfigFile } from '../../config/load.js';
import type { GlidepathConfig } from '../../config/types.js';
import { UsageError } from '../output.js';
import { startGlidepath } from '../../control/app.js';
import { parseHostPort } from '../../gateway/server.js';
import { missingNodeFlags } from './node-flags.js';
import { checkListenAddresses, explainListenError, listenersOf } from './listen-check.js';

interface UpOptions {
  config: string;
  listen?: string;
  adminListen?: string;
  dataDir?: string;
  keepWorkers?: boolean;
}

function override(cfg: GlidepathConfig, o: UpOptions): GlidepathConfig {
  const check = (flag: string, v: string | undefined) => {
    if (v === undefined) return;
    try {
      parseHostPort(v);
    } catch (err) {
      throw new UsageError(`${flag}: ${(err as Error).message}`);
    }
  };
  check('--listen', o.listen);
  check('--admin-listen', o.adminListen);
  if (o.listen === undefined && o.adminListen === undefined && o.dataDir === undefined) return cfg;
  const dataDir = o.dataDir === undefined ? cfg.server.dataDir : path.resolve(o.dataDir);
  // a cache directory that was only derived from the old data dir moves with it
  const derivedCache = path.join(cfg.server.dataDir, DEFAULTS.control.cacheDirName);
  return {
    ...cfg,
    server: {
      listen: o.listen ?? cfg.server.listen,
      adminListen: o.adminListen ?? cfg.server.adminListen,
      dataDir,
    },
    cache: cfg.cache.dir === derivedCache ? { ...cfg.cache, dir: path.join(dataDir, DEFAULTS.control.cacheDirName) } : cfg.cache,
  };
}

export function register(program: Command): void {
  program
    .command('up')
    .description('start the gateway, the admin API and the control plane')
    .option('-c, --config <file>', 'glidepath.yaml to run', 'glidepath.yaml')
    .option('--listen <host:port>', 'data plane listener (default from the config, 127.0.0.1:8080)')
    .option('--admin-listen <host:port>', 'admin API listener (default from the config, 127.0.0.1:8081)')
    .option('--data-dir <dir>', 'state directory (SQLite, admin token, worker logs)')
    .option('--keep-workers', 'leave workers running on shutdown (the next `up` adopts them)')
    .action(async (opts: UpOptions) => {
      const say = (m: string) => process.stderr.write(`${m}\n`);
      const missing = missingNodeFlags(process.execArgv, process.env.NODE_OPTIONS);
      if (missing.length > 0) {
        say(
          `glidepath: warning: node was started without ${missing.join(' ')}; the gateway then spends up to a third more CPU in garbage collection (run the glidepath command itself, or see docs/gateway.md "Memory and garbage collection")`,
        );
      }
      const cfg = override(loadConfigFile(opts.config), opts);
      // before loading a single worker: a taken port is found now, not after every worker warmed up
      const listeners = listenersOf(cfg);
      await checkListenAddresses(listeners);
      // cluster mode (and the etcd client under it) is loaded only for an etcd store: the embedded default does not pay for it
      const start = cfg.store.kind === 'etcd' ? (await import('../../control/cluster.js')).startReplica : startGlidepath;
      // a signal while the fleet starts cancels the starts (each stops the worker it began; boot then
      // stops the workers it had), instead of Node's default exit leaving them running unknown
      const booting = new AbortController();
      type Running = { dataUrl: string; adminUrl: string; close(o: { stopWorkers: boolean }): Promise<void> };
      const up: { app?: Running; stopping: boolean } = { stopping: false };
      const shutDown = (app: Running) => {
        app.close({ stopWorkers: !opts.keepWorkers }).then(
          () => process.exit(0),
          (err: unknown) => {
            say(`glidepath: shutdown error: ${String(err)}`);
            process.exit(1);
          },
        );
      };
      const stop = (sig: string) => {
        if (up.stopping) process.exit(130);
        up.stopping = true;
        if (up.app === undefined) {
          say(`glidepath: ${sig} while starting: cancelling the workers' starts`);
          booting.abort();
          return;
        }
        say(`glidepath: ${sig}, shutting down${opts.keepWorkers ? ' (workers left running)' : ''}`);
        shutDown(up.app);
      };
      process.on('SIGINT', () => stop('SIGINT'));
      process.on('SIGTERM', () => stop('SIGTERM'));
      const app = await start(cfg, { onProgress: say, signal: booting.signal }).catch((err: unknown) => {
        if (booting.signal.aborted) {
          say('glidepath: stopped before it served; the workers it had started are stopped');
          process.exit(0);
        }
        throw explainListenError(listeners, err);
      });
      up.app = app;
      if (up.stopping) {
        // the signal came after the last start: the fleet is up, and goes down again
        say(`glidepath: shutting down${opts.keepWorkers ? ' (workers left running)' : ''}`);
        return shutDown(app);
      }
      const state = cfg.store.kind === 'etcd' ? `${cfg.store.endpoints.join(',')} ${cfg.store.prefix}` : cfg.server.dataDir;
      say(`glidepath: data plane ${app.dataUrl}  admin API ${app.adminUrl}  state ${state}`);
      const model = cfg.models[0]?.name ?? 'model';
      process.stdout.write(
        `\nTry it:\n  curl -s ${app.dataUrl}/v1/chat/completions -H 'content-type: application/json' \\\n    -d '{"model":"${model}","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'\n\n`,
      );
      if ('adminTokenHint' in app) process.stdout.write(`Admin token: ${String(app.adminTokenHint)}\n`);
      // the process lives until a signal; unexpected errors in background tasks are logged, not fatal
      process.on('unhandledRejection', (err) => say(`glidepath: background error: ${String(err)}`));
      await new Promise<never>(() => undefined);
    });
}
