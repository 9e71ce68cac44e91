// Test helpers for the llama.cpp engine: tiny seeded models written to a temporary folder, and engine servers started on port 0 in this process.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bindingInstalled, loadLlama } from '../../src/engine/binding.js';
import type { Llama } from '../../src/engine/binding.js';
import { engineOptions, type EngineStartOptions } from '../../src/engine/options.js';
import { EngineServer } from '../../src/engine/server.js';
import { makeTinyModel } from '../../src/engine/tiny-model.js';
import type { TinyModelOptions } from '../../src/engine/tiny-model.js';
import { itWithEngine } from './tools.js';

export const ENGINE_INSTALLED = bindingInstalled();
/** `it` for tests that need node-llama-cpp (skipped with one line where it is not installed; failed under CI). */
export const itEngine = itWithEngine(ENGINE_INSTALLED);

/** A folder of tiny models: `model(seed)` writes `m<seed>.gguf` once and returns its path. */
export class ModelDir {
  readonly dir = mkdtempSync(path.join(tmpdir(), 'gp-engine-'));
  private readonly made = new Map<string, string>();

  model(seed: number, o: { name?: string; shape?: Omit<TinyModelOptions, 'seed'> } = {}): string {
    const file = path.join(this.dir, `${o.name ?? `m${seed}`}.gguf`);
    if (!this.made.has(file)) {
      writeFileSync(file, makeTinyModel({ seed, ...o.shape }).bytes);
      this.made.set(file, file);
    }
    return file;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let llama: Promise<Llama> | undefined;

/** An engine server in this process (one llama.cpp binding shared by all), listening on 127.0.0.1:0. */
export async function startEngine(o: EngineStartOptions): Promise<{ server: EngineServer; url: string; close(): Promise<void> }> {
  llama ??= loadLlama();
  const server = new EngineServer(engineOptions({ port: 0, threads: 1, ...o }), await llama);
  const port = await server.start();
  return { server, url: `http://127.0.0.1:${port}`, close: () => server.close() };
}
