#!/usr/bin/env -S node --initial-old-space-size=128
// The `glidepath` command: registers one verb per folder and is the single exit point.
import { Command, CommanderError } from 'commander';
import { registerVerbs } from './verbs.js';
import { exitCodeFor, onOutputClosed, printError } from './output.js';

const program = new Command();
program.name('glidepath').description('Safe model updates for LLM inference fleets').showHelpAfterError().exitOverride();

// the first argument that is not an option names the verb (`glidepath swap --confirm`)
const verb = process.argv.slice(2).find((a) => !a.startsWith('-'));
onOutputClosed(verb === 'up' || verb === 'sim' || verb === 'engine' ? 'keep-running' : 'exit');
await registerVerbs(program, verb);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // help/version print and exit 0; usage errors exit 2 (commander already printed the message)
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    printError(err);
    process.exitCode = exitCodeFor(err);
  }
}
