// Finding and loading node-llama-cpp, the optional llama.cpp binding: installed apart (`npm run engine:install`), never on the default install's path.
//
// The binding and its platform packages are large (see docs/engines.md for the measured size), so
// they live in their own package under engine/ with its own node_modules; `glidepath engine` loads
// them from there, or from wherever Node would resolve `node-llama-cpp` for this project. The types
// below are the narrow part of its API this engine uses, written out so that the project compiles
// and type-checks without the binding installed.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type Token = number;

export interface EvaluateOptions {
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
  yieldEogToken?: boolean;
}

export interface EvaluateOutput {
  token: Token;
  confidence?: number;
  probabilities?: Map<Token, number>;
}

export interface LlamaSequence {
  evaluateWithMetadata(
    tokens: Token[],
    metadata: { readonly confidence?: boolean; readonly probabilities?: boolean },
    options?: EvaluateOptions,
  ): AsyncGenerator<EvaluateOutput, void>;
  evaluateWithoutGeneratingNewTokens(tokens: Token[]): Promise<void>;
  clearHistory(): Promise<void>;
  dispose(): void;
}

export interface LlamaContext {
  getSequence(): LlamaSequence;
  readonly contextSize: number;
  dispose(): Promise<void>;
}

export interface LlamaModel {
  tokenize(text: string, specialTokens?: boolean): Token[];
  detokenize(tokens: readonly Token[], specialTokens?: boolean, lastTokens?: readonly Token[]): string;
  isEogToken(token: Token): boolean;
  readonly tokens: { readonly bos: Token | null; readonly eos: Token | null; readonly shouldPrependBosToken: boolean };
  readonly trainContextSize: number;
  readonly fileInfo: { readonly metadata: unknown };
  createContext(o: {
    contextSize: number;
    sequences: number;
    threads?: number;
    batchSize?: number;
    lora?: { adapters: { filePath: string; scale?: number }[] };
  }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}

export interface Llama {
  loadModel(o: { modelPath: string; gpuLayers?: number }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

interface BindingModule {
  getLlama(o: Record<string, unknown>): Promise<Llama>;
  LlamaLogLevel: Record<string, unknown>;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** The repository's root: the nearest folder above this file with engine/package.json (this file is in src/, dist/ or dist-bench/src/). */
function repositoryRoot(): string {
  for (let d = path.resolve(here, '..'), i = 0; i < 6; i++, d = path.dirname(d)) if (existsSync(path.join(d, 'engine', 'package.json'))) return d;
  return path.resolve(here, '..', '..');
}
const ROOT = repositoryRoot();
/** engine/ at the repository's root: the binding's own package. */
export const RUNTIME_DIR = path.join(ROOT, 'engine');
const INSTALL_HINT = 'npm run engine:install (installs node-llama-cpp into engine/)';

/** The entry file of node-llama-cpp: engine/node_modules first, then the project's own node_modules. */
export function bindingEntry(): string | undefined {
  for (const dir of [path.join(RUNTIME_DIR, 'node_modules'), path.join(ROOT, 'node_modules')]) {
    const pkgFile = path.join(dir, 'node-llama-cpp', 'package.json');
    if (!existsSync(pkgFile)) continue;
    const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as {
      exports?: { '.'?: { import?: string | { default?: string }; default?: string } };
      main?: string;
    };
    const dot = pkg.exports?.['.'];
    const imp = typeof dot?.import === 'string' ? dot.import : (dot?.import?.default ?? dot?.default ?? pkg.main ?? 'dist/index.js');
    return path.join(dir, 'node-llama-cpp', imp);
  }
  return undefined;
}

/** Whether `glidepath engine` can run here. */
export function bindingInstalled(): boolean {
  return bindingEntry() !== undefined;
}

/** llama.cpp on the CPU, with its prebuilt binary only (no build, no download at run time); its log kept to errors. */
export async function loadLlama(): Promise<Llama> {
  const entry = bindingEntry();
  if (entry === undefined) throw new Error(`glidepath engine needs node-llama-cpp, which is not installed: ${INSTALL_HINT}`);
  const m = (await import(pathToFileURL(entry).href)) as BindingModule;
  return m.getLlama({ gpu: false, build: 'never', usePrebuiltBinaries: true, progressLogs: false, logLevel: m.LlamaLogLevel.error });
}
