// The list of CLI verbs; each lives in its own folder and exports `register(program)`.
import type { Command } from 'commander';
import { register as config } from './config/index.js';
import { register as sim } from './sim/index.js';
import { register as up } from './up/index.js';

export function registerVerbs(program: Command): void {
  config(program);
  sim(program);
  up(program);
}
