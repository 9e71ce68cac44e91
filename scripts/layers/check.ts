// The import-direction checker's engine: reads a source tree into a file-level import graph, then
// reports imports against the layer rules (rules.ts), file-level import cycles, and allow-list
// entries that no longer match anything (so the list can only shrink). Pure apart from readTree.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import ts from 'typescript';

/** One source file, its path relative to the tree's root with `/` separators (`gateway/proxy.ts`). */
export interface SourceFile {
  path: string;
  text: string;
}

/** One import of a file: a file of the tree (`gateway/sse.ts`) or a package (`undici`, `node:fs`). */
export interface Import {
  /** A tree path, or a package name with node builtins written `node:x`. */
  target: string;
  internal: boolean;
  /** As written in the source. */
  specifier: string;
  line: number;
  /** `import type`, `export type … from`, `typeof import(…)`: gone at run time, still a dependency. */
  typeOnly: boolean;
}

export interface Graph {
  files: readonly string[];
  /** Per file, its imports (one per import statement; several may name the same target). */
  imports: ReadonlyMap<string, readonly Import[]>;
  /** Per file, the string literals it contains (for the rules on what a file may say, not import). */
  literals: ReadonlyMap<string, ReadonlyArray<{ text: string; line: number }>>;
  /** Relative imports that name no file of the tree. */
  unresolved: ReadonlyArray<{ file: string; specifier: string; line: number }>;
}

/**
 * A selector of the tree: a folder (`gateway`, `gateway/http1`) or a file (`defaults.ts`);
 * `*` is every file. Package names are selected by their name (`better-sqlite3`, `node:child_process`).
 */
export type Selector = string;

export interface Rule {
  id: string;
  /** The files the rule is about. */
  files: readonly Selector[];
  /** Files among them it does not apply to. */
  except?: readonly Selector[];
  /** Files of the tree these files may import; any other file of the tree is refused (packages are not restricted). */
  mayImportOnly?: readonly Selector[];
  /** Files of the tree or packages these files may not import. */
  mayNotImport?: readonly Selector[];
  /** String literals these files may not contain (an endpoint path, a key format…). */
  mayNotMention?: readonly RegExp[];
  /** One sentence, printed with every violation: why the rule exists. */
  why: string;
}

/** A known violation kept on purpose for now: one edge `from → to` (tree paths or a package name). */
export interface Allowance {
  rule: string;
  from: string;
  to: string;
}

export interface Violation {
  rule: string;
  file: string;
  line: number;
  /** The import's target, or the literal. */
  target: string;
  specifier: string;
  /** The import brings in types only (often the easiest to fix: move the type down a layer). */
  typeOnly: boolean;
  why: string;
}

export interface Cycle {
  path: string[];
  /** Every file of the tangle (strongly connected component), sorted; more than `path` when cycles overlap. */
  files: string[];
}

export interface Report {
  violations: Violation[];
  /** One per tangle of files importing each other: a shortest cycle `a → b → … → a`, and every file of the tangle. */
  cycles: Cycle[];
  /** Allow-list entries that match no current violation (or, for cycles, no edge on a cycle). */
  stale: Allowance[];
  unresolved: Graph['unresolved'];
}

/** The rule id of import cycles, for the allow-list. */
export const CYCLE_RULE = 'no-cycles';

const BUILTINS = new Set(builtinModules.filter((m) => !m.startsWith('_')));

// ---- reading --------------------------------------------------------------------------------

/** Every `.ts` file under `root` (declaration files left out), sorted. */
export function readTree(root: string): SourceFile[] {
  const out: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const abs = path.join(dir, name);
      if (statSync(abs).isDirectory()) walk(abs);
      else if (name.endsWith('.ts') && !name.endsWith('.d.ts'))
        out.push({ path: path.relative(root, abs).split(path.sep).join('/'), text: readFileSync(abs, 'utf8') });
    }
  };
  walk(root);
  return out;
}

/** The tree file a relative specifier names (`./x.js` → `x.ts`, `./dir` → `dir/index.ts`), if any. */
function resolve(from: string, specifier: string, files: ReadonlySet<string>): string | undefined {
  const joined = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const stem = joined.replace(/\.(js|ts|mjs|mts)$/, '');
  for (const candidate of [`${stem}.ts`, `${stem}.mts`, `${joined}/index.ts`]) if (files.has(candidate)) return candidate;
  return undefined;
}

/** `fs` → `node:fs`, `undici/lib/x` → `undici`, `@scope/pkg/x` → `@scope/pkg`. */
function packageOf(specifier: string): string {
  if (specifier.startsWith('node:')) return specifier.split('/')[0] as string;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
  return BUILTINS.has(name) ? `node:${name}` : name;
}

/** Is every name this import brings in a type? (`import type {…}` or `import { type a, type b }`.) */
function typeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (clause === undefined) return false; // `import './x.js'` runs the module
  if (clause.isTypeOnly) return true;
  if (clause.name !== undefined) return false;
  const bindings = clause.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

function typeOnlyExport(node: ts.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((e) => e.isTypeOnly);
}

/** Parse every file and resolve its imports against the tree. */
export function buildGraph(sources: readonly SourceFile[]): Graph {
  const files = new Set(sources.map((s) => s.path));
  const imports = new Map<string, Import[]>();
  const literals = new Map<string, Array<{ text: string; line: number }>>();
  const unresolved: Array<{ file: string; specifier: string; line: number }> = [];
  for (const src of sources) {
    const sf = ts.createSourceFile(src.path, src.text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    const lineOf = (n: ts.Node): number => sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1;
    const list: Import[] = [];
    const lits: Array<{ text: string; line: number }> = [];
    const add = (spec: ts.Expression | undefined, typeOnly: boolean, at: ts.Node): void => {
      if (spec === undefined || !ts.isStringLiteralLike(spec)) return;
      const specifier = spec.text;
      const line = lineOf(at);
      if (specifier.startsWith('.')) {
        const target = resolve(src.path, specifier, files);
        if (target === undefined) unresolved.push({ file: src.path, specifier, line });
        else list.push({ target, internal: true, specifier, line, typeOnly });
      } else {
        list.push({ target: packageOf(specifier), internal: false, specifier, line, typeOnly });
      }
    };
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, typeOnlyImport(node), node);
      else if (ts.isExportDeclaration(node)) add(node.moduleSpecifier, typeOnlyExport(node), node);
      else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference))
        add(node.moduleReference.expression, node.isTypeOnly, node);
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0], false, node);
      else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true, node);
      else if (
        ts.isStringLiteral(node) ||
        ts.isNoSubstitutionTemplateLiteral(node) ||
        ts.isTemplateHead(node) ||
        ts.isTemplateMiddle(node) ||
        ts.isTemplateTail(node)
      ) {
        // module specifiers are imports, not things a file says
        const parent = node.parent;
        const isSpecifier =
          ts.isImportDeclaration(parent) ||
          ts.isExportDeclaration(parent) ||
          ts.isExternalModuleReference(parent) ||
          (ts.isLiteralTypeNode(parent) && ts.isImportTypeNode(parent.parent)) ||
          (ts.isCallExpression(parent) && parent.expression.kind === ts.SyntaxKind.ImportKeyword);
        if (!isSpecifier) lits.push({ text: node.text, line: lineOf(node) });
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
    imports.set(src.path, list);
    literals.set(src.path, lits);
  }
  return { files: [...files].sort(), imports, literals, unresolved };
}

// ---- rules ----------------------------------------------------------------------------------

/** Does a tree path fall under a selector (`gateway` takes `gateway/**`; `defaults.ts` only itself)? */
function inTree(p: string, sel: Selector): boolean {
  return sel === '*' || p === sel || p.startsWith(`${sel}/`);
}

/** Does a package name fall under a selector (`undici` takes `undici`; `node:child_process` only itself)? */
function isPackage(name: string, sel: Selector): boolean {
  return name === sel;
}

function applies(rule: Rule, file: string): boolean {
  return rule.files.some((s) => inTree(file, s)) && !(rule.except ?? []).some((s) => inTree(file, s));
}

function refused(rule: Rule, imp: Import): boolean {
  if (imp.internal) {
    if (rule.mayImportOnly && !rule.mayImportOnly.some((s) => inTree(imp.target, s))) return true;
    return (rule.mayNotImport ?? []).some((s) => inTree(imp.target, s));
  }
  return (rule.mayNotImport ?? []).some((s) => isPackage(imp.target, s));
}

/** Every import (and literal) against the rules, before the allow-list. */
export function violations(graph: Graph, rules: readonly Rule[]): Violation[] {
  const out: Violation[] = [];
  for (const file of graph.files) {
    for (const rule of rules) {
      if (!applies(rule, file)) continue;
      for (const imp of graph.imports.get(file) ?? []) {
        if (refused(rule, imp))
          out.push({ rule: rule.id, file, line: imp.line, target: imp.target, specifier: imp.specifier, typeOnly: imp.typeOnly, why: rule.why });
      }
      for (const re of rule.mayNotMention ?? []) {
        for (const lit of graph.literals.get(file) ?? []) {
          if (re.test(lit.text))
            out.push({ rule: rule.id, file, line: lit.line, target: lit.text, specifier: JSON.stringify(lit.text), typeOnly: false, why: rule.why });
        }
      }
    }
  }
  return out;
}

// ---- cycles ---------------------------------------------------------------------------------

/** File → the tree files it imports (type-only imports included: they tie the files together as much). */
function edges(graph: Graph, skip: ReadonlySet<string>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const file of graph.files) {
    const to = new Set<string>();
    for (const imp of graph.imports.get(file) ?? []) if (imp.internal && !skip.has(`${file}\u0000${imp.target}`)) to.add(imp.target);
    out.set(file, [...to].sort());
  }
  return out;
}

/** Strongly connected components with more than one file, or one file importing itself (Tarjan). */
function components(adj: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of adj.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
      }
    }
    if (low.get(v) === index.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1 || (adj.get(v) ?? []).includes(v)) out.push(comp.sort());
    }
  };
  for (const v of adj.keys()) if (!index.has(v)) connect(v);
  return out.sort((a, b) => (a[0] as string).localeCompare(b[0] as string));
}

/** A shortest cycle through the component's first file, staying inside the component (BFS). */
function cycleThrough(comp: readonly string[], adj: ReadonlyMap<string, readonly string[]>): string[] {
  const inside = new Set(comp);
  const start = comp[0] as string;
  const prev = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i] as string;
    for (const w of adj.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const p = [v];
        while (p[0] !== start) p.unshift(prev.get(p[0] as string) as string);
        return [...p, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}

/** One cycle per tangle of files (strongly connected component), as a path back to its start. */
export function cycles(graph: Graph, skip: ReadonlySet<string> = new Set()): Cycle[] {
  const adj = edges(graph, skip);
  return components(adj).map((files) => ({ path: cycleThrough(files, adj), files }));
}

// ---- the whole check ------------------------------------------------------------------------

const edgeKey = (from: string, to: string): string => `${from}\u0000${to}`;

/**
 * Violations not in the allow-list, cycles left once allowed cycle edges are set aside, and
 * allow-list entries that match nothing (a fixed edge must leave the list in the same change).
 */
export function check(graph: Graph, rules: readonly Rule[], allowed: readonly Allowance[] = []): Report {
  const all = violations(graph, rules);
  const allowedKeys = new Set(allowed.filter((a) => a.rule !== CYCLE_RULE).map((a) => `${a.rule}\u0000${edgeKey(a.from, a.to)}`));
  const violationKeys = new Set(all.map((v) => `${v.rule}\u0000${edgeKey(v.file, v.target)}`));
  const skip = new Set(allowed.filter((a) => a.rule === CYCLE_RULE).map((a) => edgeKey(a.from, a.to)));
  // an allowed cycle edge is honest while it exists and its two ends still lie on one cycle
  const tangle = new Map<string, number>();
  components(edges(graph, new Set())).forEach((comp, i) => comp.forEach((f) => tangle.set(f, i)));
  const hasEdge = (from: string, to: string): boolean => (graph.imports.get(from) ?? []).some((i) => i.internal && i.target === to);
  const stale = allowed.filter((a) => {
    if (a.rule === CYCLE_RULE) return !hasEdge(a.from, a.to) || tangle.get(a.from) === undefined || tangle.get(a.from) !== tangle.get(a.to);
    return !violationKeys.has(`${a.rule}\u0000${edgeKey(a.from, a.to)}`);
  });
  return {
    violations: all.filter((v) => !allowedKeys.has(`${v.rule}\u0000${edgeKey(v.file, v.target)}`)),
    cycles: cycles(graph, skip),
    stale,
    unresolved: graph.unresolved,
  };
}

/** Human lines, one per problem, paths shown under `root` (e.g. `src`). Empty when all is well. */
export function formatReport(r: Report, root: string, allowListFile: string): string[] {
  const at = (f: string): string => `${root}/${f}`;
  const lines: string[] = [];
  for (const v of r.violations) {
    const literal = v.specifier.startsWith('"');
    const what = literal
      ? `mentions ${v.specifier}`
      : `imports ${v.typeOnly ? 'types from ' : ''}${v.specifier}${v.target === v.specifier ? '' : ` (${v.target})`}`;
    lines.push(`${at(v.file)}:${v.line}: ${v.rule}: ${what} — ${v.why}`);
  }
  for (const c of r.cycles) {
    const more = c.files.filter((f) => !c.path.includes(f));
    lines.push(`${CYCLE_RULE}: ${c.path.map(at).join(' → ')}${more.length > 0 ? ` (the same tangle also holds ${more.map(at).join(', ')})` : ''}`);
  }
  for (const u of r.unresolved) lines.push(`${at(u.file)}:${u.line}: cannot resolve ${JSON.stringify(u.specifier)}`);
  for (const s of r.stale) lines.push(`${allowListFile}: allowed ${s.rule} ${s.from} → ${s.to} no longer happens: remove it from the allow-list`);
  return lines;
}
