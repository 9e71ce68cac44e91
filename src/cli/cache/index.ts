// `glidepath cache download --version V`: copy a version's weights into the weight cache and verify
// its weight hash, so a later `deploy green` loads from local disk.
import type { Command } from 'commander';
import { enc, err, fmtMs, modelPath, out, resolveModel, session, textFlag, withCommon } from '../common.js';
import type { CommonOptions } from '../common.js';
import { printJson } from '../output.js';
import type { CacheResultView } from '../../api/types.js';

function fmtBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${x.toFixed(1)} ${units[i]}`;
}

export function register(program: Command): void {
  const cache = program.command('cache').description('the weight cache');
  withCommon(
    cache
      .command('download')
      .description(
        "copy a version's weights (file://, a local path, http(s)://) into the cache and verify its weight hash; evicts least recently used versions beyond max_versions, never the active or standby",
      )
      .requiredOption('--version <version>', 'the registered version whose weights to cache')
      .option('--force', 'download again even when already cached'),
    { model: 'one' },
  ).action(async (o: CommonOptions & { version: string; force?: boolean }) => {
    const s = session(o);
    const id = textFlag('--version', o.version) as string; // a required option: commander refuses a missing one
    const model = await resolveModel(s, o.model);
    if (!s.json) err(`caching ${model}/${id}…`);
    const r = await s.client.post<CacheResultView>(modelPath(model, `/versions/${enc(id)}/cache`), { force: o.force ?? false }, { long: true });
    if (s.json) return printJson(r);
    if (r.already_cached) out(`${r.model}/${r.version} already cached at ${r.path} (${fmtBytes(r.bytes)}, ${r.hash}${r.verified ? ', verified' : ''})`);
    else out(`Cached ${r.model}/${r.version}: ${fmtBytes(r.bytes)} from ${r.source} in ${fmtMs(r.duration_ms)} → ${r.path}`);
    out(r.verified ? `Weight hash verified: ${r.hash}` : `Weight hash NOT verified (the version has no weight_hash): ${r.hash}`);
    for (const e of r.evicted) out(`Evicted ${e.model}/${e.version} (${fmtBytes(e.bytes)}, least recently used)`);
    for (const n of r.notes) out(`note: ${n}`);
  });
}
