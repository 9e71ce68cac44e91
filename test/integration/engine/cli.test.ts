import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeGgufHeader } from '../../../src/engine/gguf.js';
import { itEngine, ModelDir } from '../../helpers/engine.js';
import { post } from '../sim/helpers.js';

// the built CLI (`npm test` builds it first)
const MAIN = join(import.meta.dirname, '../../../dist/cli/main.js');
const models = new ModelDir();
afterAll(() => models.remove());

const run = (args: string[]) => spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: 30_000 });

describe('glidepath engine (the command)', () => {
  it('make-model writes the same GGUF for the same seed and another for another seed', () => {
    const out = (seed: number, name: string) => {
      const r = run(['engine', 'make-model', '--out', join(models.dir, name), '--seed', String(seed)]);
      expect(r.status).toBe(0);
      return JSON.parse(r.stdout) as { path: string; bytes: number; weights_sha256: string };
    };
    const [x, y, z] = [out(5, 'a.gguf'), out(5, 'b.gguf'), out(6, 'c.gguf')];
    expect(readFileSync(y.path).equals(readFileSync(x.path))).toBe(true);
    expect(z.weights_sha256).not.toBe(x.weights_sha256);
    expect(x.bytes).toBeLessThan(4 * 1024 * 1024);
    const header = decodeGgufHeader(readFileSync(x.path));
    expect(header.metadata.get('general.architecture')).toBe('llama');
    expect(header.metadata.get('glidepath.weights_sha256')).toBe(x.weights_sha256);
    expect(String(header.metadata.get('tokenizer.chat_template'))).toContain('<|im_start|>');
  });

  it('make-adapter writes a LoRA adapter GGUF for a model of that shape', () => {
    const r = run(['engine', 'make-adapter', '--out', join(models.dir, 'lora.gguf'), '--seed', '3', '--rank', '2']);
    expect(r.status).toBe(0);
    const { path: file } = JSON.parse(r.stdout) as { path: string };
    const h = decodeGgufHeader(readFileSync(file));
    expect([h.metadata.get('general.type'), h.metadata.get('adapter.type'), h.metadata.get('adapter.lora.alpha')]).toEqual(['adapter', 'lora', 4]);
    expect(h.tensors.find((t) => t.name === 'blk.1.attn_q.weight.lora_a')?.dims).toEqual([64, 2]);
    expect(h.tensors.find((t) => t.name === 'blk.1.attn_q.weight.lora_b')?.dims).toEqual([2, 64]);
  });

  it('refuses bad arguments with a message naming them, exit code 2', () => {
    const model = models.model(1);
    const cases: [string[], RegExp][] = [
      [['engine'], /--model FILE.gguf is required/],
      [['engine', '--model', join(models.dir, 'none.gguf')], /none.gguf is not a file/],
      [['engine', '--model', model, '--port', 'abc'], /--port must be a number, got "abc"/],
      [['engine', '--model', model, '--max-num-seqs', '0'], /--max-num-seqs must be a positive integer/],
      [['engine', 'make-model', '--out', join(models.dir, 'x.gguf'), '--layers', '-1'], /--layers/],
      [['engine', 'make-model', '--out', join(models.dir, 'x.gguf'), '--embedding', '65'], /--embedding 65 is not a multiple of --heads 4/],
      [['engine', 'make-adapter', '--out', join(models.dir, 'y.gguf'), '--rank', '0'], /--rank must be a positive integer/],
      [['engine', '--model', model, '--max-loras', '-2'], /--max-loras/],
    ];
    for (const [args, message] of cases) {
      const r = run(args);
      expect([args.join(' '), r.status]).toEqual([args.join(' '), 2]);
      expect(r.stderr).toMatch(message);
    }
  });

  itEngine('fails with exit code 1 on a file that is no model, and leaves nothing listening', () => {
    const junk = join(models.dir, 'junk.gguf');
    writeFileSync(junk, 'not-a-model\n');
    const r = run(['engine', '--model', junk, '--port', '0']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/junk.gguf: Invalid GGUF magic/);
  });

  itEngine('serves once loaded, prints where, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, [
      MAIN,
      'engine',
      '--model',
      models.model(1),
      '--served-model-name',
      'tiny',
      'alias',
      '--port',
      '0',
      '--version',
      'v7',
    ]);
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`exited ${code}`)));
      });
      const l = JSON.parse(line) as { event: string; url: string; model: string; version: string };
      expect(l).toMatchObject({ event: 'listening', model: 'tiny', version: 'v7' });
      for (const name of ['tiny', 'alias']) expect((await post(l.url, '/v1/completions', { model: name, prompt: 'hi', max_tokens: 2 })).status).toBe(200);
    } finally {
      const exited = new Promise<number | null>((r) => child.once('exit', r));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});
