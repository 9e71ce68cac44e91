import { describe, expect, it } from 'vitest';
import { ALIGNMENT, decodeGgufHeader, encodeGguf, f32s, i32s, str, strs, u32 } from '../../../src/engine/gguf.js';
import { makeTinyModel, vocabulary } from '../../../src/engine/tiny-model.js';

describe('GGUF writer', () => {
  it('writes a header the reader gives back, with aligned tensor data', () => {
    const data = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const md = new Map([
      ['general.architecture', str('llama')],
      ['a.count', u32(7)],
      ['a.names', strs(['x', 'yz', ''])],
      ['a.scores', f32s([0.5, -1])],
      ['a.types', i32s([1, -6])],
    ]);
    const b = encodeGguf(md, [{ name: 't', dims: [3, 2], data }]);
    expect(b.subarray(0, 4).toString('latin1')).toBe('GGUF');
    const h = decodeGgufHeader(b);
    expect(h.metadata.get('general.architecture')).toBe('llama');
    expect(h.metadata.get('a.count')).toBe(7);
    expect(h.metadata.get('a.names')).toEqual(['x', 'yz', '']);
    expect(h.metadata.get('a.scores')).toEqual([0.5, -1]);
    expect(h.metadata.get('a.types')).toEqual([1, -6]);
    expect(h.tensors).toEqual([{ name: 't', dims: [3, 2], type: 0 }]);
    // the data section starts aligned and holds the floats as written
    const start = b.length - Math.ceil(24 / ALIGNMENT) * ALIGNMENT;
    expect(start % ALIGNMENT).toBe(0);
    expect(new Float32Array(b.buffer.slice(b.byteOffset + start, b.byteOffset + start + 24))).toEqual(data);
  });

  it('refuses tensors whose data does not fill their dimensions', () => {
    expect(() => encodeGguf(new Map(), [{ name: 'w', dims: [2, 2], data: new Float32Array(3) }])).toThrow(/tensor w: dimensions 2×2 hold 4 values, data has 3/);
  });

  it('names what is wrong with a file that is not GGUF', () => {
    expect(() => decodeGgufHeader(Buffer.from('GGML0000'))).toThrow(/not a GGUF file/);
    const ok = encodeGguf(new Map([['k', str('v')]]), []);
    expect(() => decodeGgufHeader(ok.subarray(0, 20))).toThrow(/truncated/);
  });
});

describe('the tiny model', () => {
  it('is the same bytes for the same seed and other weights for another', () => {
    const a = makeTinyModel({ seed: 1 });
    const b = makeTinyModel({ seed: 1 });
    const c = makeTinyModel({ seed: 2 });
    expect(a.bytes.equals(b.bytes)).toBe(true);
    expect(a.weightsSha256).toBe(b.weightsSha256);
    expect(c.weightsSha256).not.toBe(a.weightsSha256);
    expect(a.bytes.length).toBeLessThan(2 * 1024 * 1024);
  });

  it('declares a llama model with its tokenizer, chat template and weights hash', () => {
    const m = makeTinyModel({ seed: 3, layers: 1, contextLength: 512 });
    const h = decodeGgufHeader(m.bytes);
    expect(h.metadata.get('general.architecture')).toBe('llama');
    expect(h.metadata.get('llama.block_count')).toBe(1);
    expect(h.metadata.get('llama.context_length')).toBe(512);
    expect(h.metadata.get('glidepath.weights_sha256')).toBe(m.weightsSha256);
    expect(String(h.metadata.get('tokenizer.chat_template'))).toContain('<|im_start|>');
    const tokens = h.metadata.get('tokenizer.ggml.tokens') as string[];
    expect(tokens.length).toBe(m.vocabulary.tokens.length);
    expect(h.tensors.map((t) => t.name)).toContain('blk.0.ffn_down.weight');
    expect(h.tensors.find((t) => t.name === 'token_embd.weight')?.dims).toEqual([64, tokens.length]);
  });

  it('has a byte token for every byte and every longer piece reachable by merging two pieces', () => {
    const v = vocabulary();
    const set = new Set(v.tokens);
    for (let b = 0; b < 256; b++) expect(set.has(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)).toBe(true);
    let pieces = 0;
    for (const t of v.tokens) {
      if (t.length < 2 || t.startsWith('<')) continue;
      pieces++;
      expect(set.has(t.slice(0, -1)), t).toBe(true);
      expect(set.has(t.slice(-1)), t).toBe(true);
    }
    expect(pieces).toBeGreaterThan(200);
    expect(new Set(v.tokens).size).toBe(v.tokens.length);
  });
});
