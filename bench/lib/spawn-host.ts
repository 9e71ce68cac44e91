// One host for `npm run bench:spawn`: a heap the size of a busy gateway's, then worker starts through
// a given build's spawnChild: how long each call holds the event loop, and the longest gap between two
// turns of the loop around it.
// argv: <build root> <resident MiB> <starts> <workDir>; prints one JSON line.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

interface ChildLike {
  stop(graceMs: number): Promise<unknown>;
}
type SpawnChild = (cmd: string, args: readonly string[], opts: { env: NodeJS.ProcessEnv; workDir: string; name: string }) => ChildLike | Promise<ChildLike>;

const [build = '.', mib = '200', starts = '20', workDir = '.'] = process.argv.slice(2);
const mod = (await import(pathToFileURL(path.join(build, 'dist', 'providers', 'child.js')).href)) as { spawnChild: SpawnChild };

// live objects up to the resident size asked (a gateway's heap with its streams, its page tables to copy on fork)
const keep: { i: number; s: string }[][] = [];
while (process.memoryUsage().rss < Number(mib) * 2 ** 20) keep.push(Array.from({ length: 1000 }, (_, i) => ({ i, s: `stream-${i}-${keep.length}` })));

/** The longest gap (ms) between two consecutive turns of the loop over the next `ms`. */
function longestGap(ms: number): Promise<number> {
  let last = performance.now();
  const end = last + ms;
  let max = 0;
  return new Promise((resolve) => {
    const turn = (): void => {
      const t = performance.now();
      max = Math.max(max, t - last);
      last = t;
      if (t >= end) resolve(max);
      else setImmediate(turn);
    };
    setImmediate(turn);
  });
}

const WINDOW_MS = 300;
const gaps: number[] = [];
const quiet: number[] = [];
const calls: number[] = [];
const held: number[] = [];
const heldCpu: number[] = [];
for (let i = 0; i < Number(starts); i++) {
  quiet.push(await longestGap(WINDOW_MS));
  const watching = longestGap(WINDOW_MS);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const started = mod.spawnChild(process.execPath, ['-e', 'setInterval(() => {}, 1e6)'], {
    env: { ...process.env, CUDA_VISIBLE_DEVICES: '0' },
    workDir,
    name: `w${i}`,
  });
  // the call's synchronous part, the environment copied as the providers do: the event loop held by the start (a fork and exec, or a message)
  held.push(performance.now() - t0);
  const c = process.cpuUsage(c0);
  heldCpu.push((c.user + c.system) / 1000);
  const child = await started;
  calls.push(performance.now() - t0);
  gaps.push(await watching);
  await child.stop(2_000);
}
process.stdout.write(
  JSON.stringify({ rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20), gaps, quiet, calls, held, heldCpu, objects: keep.length * 1000 }) + '\n',
);
process.exit(0);
