// The shared buffer whole writes are assembled in (responses to clients, requests to workers), and the copying into it.
import type { Socket } from 'node:net';

/** Buffer's encoding-specific writers (on Buffer.prototype since Node's early days): no argument juggling. */
export interface RawWriter extends Buffer {
  latin1Write(s: string, offset: number): number;
  utf8Write(s: string, offset: number): number;
}

/**
 * A write that fits is assembled in this one frame (one process, one event loop: assembly and
 * write never interleave), so nothing is allocated per write while the kernel takes each write
 * whole — as it does unless the reader is slow. A write the socket has to keep pending keeps the
 * frame, and a new one takes its place.
 */
const FRAME_SIZE = 64 * 1024;
let frame = Buffer.allocUnsafeSlow(FRAME_SIZE) as RawWriter;

/** Room for a write of `n` bytes: the shared frame when it fits, else a new buffer. Fill it, then writeFrame(). */
export function frameFor(n: number): RawWriter {
  return n <= FRAME_SIZE ? frame : (Buffer.allocUnsafe(n) as RawWriter);
}

/** Write the first `n` bytes of `out` (from frameFor) to `socket`; returns socket.write's answer. */
export function writeFrame(socket: Socket, out: Buffer, n: number): boolean {
  if (out !== frame) return socket.write(n === out.length ? out : out.subarray(0, n));
  const ok = socket.write(out.subarray(0, n));
  // not all taken by the kernel at once (or still connecting): that frame is the socket's until written
  if (socket.writableLength !== 0) frame = Buffer.allocUnsafeSlow(FRAME_SIZE) as RawWriter;
  return ok;
}

/**
 * Copy a latin1 string into `out` at `o`; returns the offset after it. Short ones (a chunk-size
 * line, CRLF, a Content-Length value) byte by byte: cheaper than a call into C++.
 */
export function putLatin1(out: RawWriter, str: string, o: number): number {
  const n = str.length;
  if (n > 32) return o + out.latin1Write(str, o);
  for (let i = 0; i < n; i++) out[o + i] = str.charCodeAt(i);
  return o + n;
}
