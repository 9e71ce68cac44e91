// `npm run lint`'s import-direction check: src/ against scripts/layers/rules.ts. Exits 1 with one
// line per problem (file:line, rule, import, why), 0 when the layers hold.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildGraph, check, formatReport, readTree } from './layers/check.js';
import { ALLOWED, RULES } from './layers/rules.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src');
const graph = buildGraph(readTree(root));
const problems = formatReport(check(graph, RULES, ALLOWED), 'src', 'scripts/layers/rules.ts');
if (problems.length > 0) {
  for (const p of problems) console.error(p);
  console.error(`layers: ${problems.length} problem(s); the rules and why: docs/layers.md`);
  process.exitCode = 1;
} else {
  console.log(`layers: ${graph.files.length} files, ${RULES.length} rules, ${ALLOWED.length} allowed edge(s) left; no cycles`);
}
