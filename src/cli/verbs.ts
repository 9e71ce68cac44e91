// The list of CLI verbs; each lives in its own folder and exports `register(program)`.
import type { Command } from 'commander';
import { register as audit } from './audit/index.js';
import { register as config } from './config/index.js';
import { register as deploy } from './deploy/index.js';
import { register as pipeline } from './pipeline/index.js';
import { register as rollback } from './rollback/index.js';
import { register as sim } from './sim/index.js';
import { register as status } from './status/index.js';
import { register as swap } from './swap/index.js';
import { register as up } from './up/index.js';
import { register as version } from './version/index.js';
import { register as workers } from './workers/index.js';

export function registerVerbs(program: Command): void {
  config(program);
  sim(program);
  up(program);
  status(program);
  version(program);
  deploy(program);
  swap(program);
  rollback(program);
  workers(program);
  audit(program);
  pipeline(program);
}
