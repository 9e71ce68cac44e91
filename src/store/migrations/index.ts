// The ordered list of schema migrations. Embedded as TS modules so they ship in dist/ with tsc and
// are found the same way under vitest (src/) and at runtime (dist/): no files to copy or locate.
import * as m001 from './001_init.js';
import * as m002 from './002_health.js';
import * as m003 from './003_gpu_groups.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Append new migrations here, in order; versions are 1, 2, 3, … without gaps. */
export const MIGRATIONS: readonly Migration[] = [m001, m002, m003];

export const LATEST_SCHEMA_VERSION: number = MIGRATIONS.length;
