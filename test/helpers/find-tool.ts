// Where an optional program is (test/helpers/tools.ts decides run, skip or fail on it); apart from tools.ts,
// which imports vitest, so that scripts run outside vitest (the dashboard's screenshots) find programs alike.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

// sbin directories are searched too: an ordinary user's PATH often lacks them
const EXTRA_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

/** The absolute path of the executable `name` on PATH (or in the sbin directories), if any. */
export function findTool(name: string, path: string = process.env.PATH ?? ''): string | undefined {
  for (const dir of [...path.split(delimiter).filter((d) => d !== ''), ...EXTRA_DIRS]) {
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}
