// GGUF v3 files written from metadata and F32 tensors (the format llama.cpp loads), and their metadata read back.
//
// Layout (ggml's gguf.h): magic "GGUF", version 3, tensor count (u64), metadata count (u64); each
// metadata entry is a key (u64 length + UTF-8), a type (u32) and a value; each tensor info is a
// name, its dimension count and dimensions (innermost first, u64), its type (u32) and its offset in
// the data section (u64); then padding to the alignment, then the tensors' bytes, each aligned.

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const VERSION = 3;
export const ALIGNMENT = 32;

/** GGUF metadata value types (gguf.h). */
const T = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, str: 8, arr: 9, u64: 10, i64: 11, f64: 12 } as const;
const TYPE_NAMES = Object.fromEntries(Object.entries(T).map(([k, v]) => [v, k])) as Record<number, keyof typeof T>;
/** ggml tensor type of 32-bit floats. */
const GGML_F32 = 0;

export type GgufScalar = { type: 'u32' | 'i32' | 'f32'; value: number } | { type: 'bool'; value: boolean } | { type: 'str'; value: string };
export type GgufArray = { type: 'arr'; of: 'str'; value: readonly string[] } | { type: 'arr'; of: 'f32' | 'i32'; value: ArrayLike<number> };
export type GgufValue = GgufScalar | GgufArray;

export const u32 = (value: number): GgufValue => ({ type: 'u32', value });
export const i32 = (value: number): GgufValue => ({ type: 'i32', value });
export const f32 = (value: number): GgufValue => ({ type: 'f32', value });
export const bool = (value: boolean): GgufValue => ({ type: 'bool', value });
export const str = (value: string): GgufValue => ({ type: 'str', value });
export const strs = (value: readonly string[]): GgufValue => ({ type: 'arr', of: 'str', value });
export const f32s = (value: ArrayLike<number>): GgufValue => ({ type: 'arr', of: 'f32', value });
export const i32s = (value: ArrayLike<number>): GgufValue => ({ type: 'arr', of: 'i32', value });

export interface GgufTensor {
  name: string;
  /** ggml's order: the innermost (contiguous) dimension first. */
  dims: readonly number[];
  data: Float32Array;
}

/** Appends little-endian values to a growing list of buffers. */
class Out {
  readonly parts: Buffer[] = [];
  size = 0;
  private push(b: Buffer): void {
    this.parts.push(b);
    this.size += b.length;
  }
  u32(n: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32LE(n >>> 0);
    this.push(b);
  }
  i32(n: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeInt32LE(n);
    this.push(b);
  }
  u64(n: number): void {
    const b = Buffer.allocUnsafe(8);
    b.writeBigUInt64LE(BigInt(n));
    this.push(b);
  }
  f32(n: number): void {
    const b = Buffer.allocUnsafe(4);
    b.writeFloatLE(n);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  bytes(b: Buffer): void {
    this.push(b);
  }
  pad(to: number): void {
    const n = (to - (this.size % to)) % to;
    if (n > 0) this.push(Buffer.alloc(n));
  }
}

function writeValue(o: Out, v: GgufValue): void {
  switch (v.type) {
    case 'u32':
      o.u32(v.value);
      return;
    case 'i32':
      o.i32(v.value);
      return;
    case 'f32':
      o.f32(v.value);
      return;
    case 'bool':
      o.bytes(Buffer.from([v.value ? 1 : 0]));
      return;
    case 'str':
      o.str(v.value);
      return;
    case 'arr':
      o.u32(T[v.of]);
      o.u64(v.value.length);
      if (v.of === 'str') for (const s of v.value) o.str(s);
      else {
        const b = Buffer.allocUnsafe(4 * v.value.length);
        for (let i = 0; i < v.value.length; i++) {
          if (v.of === 'f32') b.writeFloatLE(v.value[i] as number, 4 * i);
          else b.writeInt32LE(v.value[i] as number, 4 * i);
        }
        o.bytes(b);
      }
  }
}

/** The bytes of a GGUF file holding `metadata` and `tensors` (all F32). */
export function encodeGguf(metadata: ReadonlyMap<string, GgufValue>, tensors: readonly GgufTensor[]): Buffer {
  const o = new Out();
  o.u32(MAGIC);
  o.u32(VERSION);
  o.u64(tensors.length);
  o.u64(metadata.size);
  for (const [k, v] of metadata) {
    o.str(k);
    o.u32(T[v.type]);
    writeValue(o, v);
  }
  let offset = 0;
  for (const t of tensors) {
    const n = t.dims.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`tensor ${t.name}: dimensions ${t.dims.join('×')} hold ${n} values, data has ${t.data.length}`);
    o.str(t.name);
    o.u32(t.dims.length);
    for (const d of t.dims) o.u64(d);
    o.u32(GGML_F32);
    o.u64(offset);
    offset += Math.ceil((4 * n) / ALIGNMENT) * ALIGNMENT;
  }
  o.pad(ALIGNMENT);
  for (const t of tensors) {
    o.bytes(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    o.pad(ALIGNMENT);
  }
  return Buffer.concat(o.parts, o.size);
}

/** What a GGUF file's header says: its metadata (arrays as JS arrays) and its tensors' names and shapes. */
export interface GgufHeader {
  metadata: Map<string, unknown>;
  tensors: { name: string; dims: number[]; type: number }[];
}

/** Read a GGUF file's header (metadata and tensor infos); throws naming what is wrong when it is not GGUF v2/v3. */
export function decodeGgufHeader(b: Buffer): GgufHeader {
  let p = 0;
  const need = (n: number) => {
    if (p + n > b.length) throw new Error(`GGUF file truncated at byte ${p} (needed ${n} more)`);
  };
  const u32r = () => (need(4), (p += 4), b.readUInt32LE(p - 4));
  const u64r = () => {
    need(8);
    p += 8;
    const n = b.readBigUInt64LE(p - 8);
    if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`GGUF value at byte ${p - 8} is too large`);
    return Number(n);
  };
  const strr = () => {
    const n = u64r();
    need(n);
    p += n;
    return b.toString('utf8', p - n, p);
  };
  const scalar = (t: number): unknown => {
    switch (TYPE_NAMES[t]) {
      case 'u8':
        return (need(1), b.readUInt8(p++));
      case 'i8':
        return (need(1), b.readInt8(p++));
      case 'u16':
        return (need(2), (p += 2), b.readUInt16LE(p - 2));
      case 'i16':
        return (need(2), (p += 2), b.readInt16LE(p - 2));
      case 'u32':
        return u32r();
      case 'i32':
        return (need(4), (p += 4), b.readInt32LE(p - 4));
      case 'f32':
        return (need(4), (p += 4), b.readFloatLE(p - 4));
      case 'bool':
        return (need(1), b.readUInt8(p++) !== 0);
      case 'str':
        return strr();
      case 'u64':
      case 'i64':
        return u64r();
      case 'f64':
        return (need(8), (p += 8), b.readDoubleLE(p - 8));
      case 'arr': {
        const of = u32r();
        const n = u64r();
        const out: unknown[] = [];
        for (let i = 0; i < n; i++) out.push(scalar(of));
        return out;
      }
      default:
        throw new Error(`GGUF metadata type ${t} at byte ${p - 4} is unknown`);
    }
  };
  if (u32r() !== MAGIC) throw new Error('not a GGUF file (its first four bytes are not "GGUF")');
  const version = u32r();
  if (version !== 2 && version !== 3) throw new Error(`GGUF version ${version} is not supported (2 or 3)`);
  const nTensors = u64r();
  const nKv = u64r();
  const metadata = new Map<string, unknown>();
  for (let i = 0; i < nKv; i++) {
    const k = strr();
    metadata.set(k, scalar(u32r()));
  }
  const tensors: GgufHeader['tensors'] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = strr();
    const nd = u32r();
    const dims: number[] = [];
    for (let d = 0; d < nd; d++) dims.push(u64r());
    const type = u32r();
    u64r();
    tensors.push({ name, dims, type });
  }
  return { metadata, tensors };
}
