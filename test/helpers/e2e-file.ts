// One `glidepath up` for a whole e2e test file (vitest hooks; kept apart from e2e-up.ts, which benchmarks import too).
import { afterAll, beforeAll } from 'vitest';
import { cleanupAll, ensureBuilt, removeDir, startUp, tempDir, writeConfig } from './e2e-up.js';
import type { UpProcess } from './e2e-up.js';

/**
 * Started before the file's tests (built first) from a config written for its data directory,
 * stopped and cleaned up after them. `current()` is the running process.
 */
export function upForFile(prefix: string, config: (dataDir: string) => string): { current(): UpProcess } {
  let dir = '';
  let up: UpProcess | undefined;
  beforeAll(async () => {
    ensureBuilt();
    dir = tempDir(prefix);
    writeConfig(dir, config(`${dir}/state`));
    up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state` });
  }, 60_000);
  afterAll(async () => {
    await up?.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  });
  return {
    current: () => {
      if (up === undefined) throw new Error(`glidepath up for ${prefix} is not running`);
      return up;
    },
  };
}
