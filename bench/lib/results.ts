// Where a benchmark's results go: the checks table appended to its Markdown, then
// bench/results/<name>.md and <name>.json (what the README summarises).
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type Check = [name: string, ok: boolean, value: string];

/** Append the targets table (`| target (issue N) | met | measured |`) to `lines`, write both files, and return the Markdown. */
export function writeResults(root: string, name: string, issue: string, lines: string[], checks: readonly Check[], json: Record<string, unknown>): string {
  lines.push('', `| target (${issue}) | met | measured |`, '|---|---|---|');
  for (const [n, ok, v] of checks) lines.push(`| ${n} | ${ok ? 'yes' : 'NO'} | ${v} |`);
  const md = lines.join('\n') + '\n';
  const out = path.join(root, 'bench', 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, `${name}.md`), md);
  const body = { at: new Date().toISOString(), node: process.version, ...json, checks: checks.map(([n, ok, value]) => ({ name: n, ok, value })) };
  writeFileSync(path.join(out, `${name}.json`), JSON.stringify(body, null, 2));
  return md;
}
