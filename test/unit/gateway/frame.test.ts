// The shared write frame: reused while the kernel takes writes whole, handed to the socket (and replaced) when one stays pending.
import { once } from 'node:events';
import { createServer, connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { frameFor, putLatin1, writeFrame } from '../../../src/gateway/frame.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

/** A connected pair on loopback; the server side starts paused (its reader does not read). */
async function pair(): Promise<{ writer: Socket; reader: Socket }> {
  const server = createServer({ pauseOnConnect: true });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const writer = connect((server.address() as AddressInfo).port, '127.0.0.1');
  const [reader] = (await once(server, 'connection')) as [Socket];
  await once(writer, 'connect');
  closers.push(() => {
    writer.destroy();
    reader.destroy();
    server.close();
  });
  return { writer, reader };
}

describe('frameFor / writeFrame', () => {
  it('a frame whose write stays pending is not reused: every write arrives as it was assembled', async () => {
    const { writer, reader } = await pair();
    const size = 16 * 1024;
    const marks: number[] = [];
    let pendingAt = -1;
    // write distinct frames until one stays pending (the reader is not reading), then ten more
    for (let i = 0; i < 8192 && (pendingAt === -1 || i < pendingAt + 10); i++) {
      const out = frameFor(size);
      out.fill(i % 251, 0, size);
      writeFrame(writer, out, size);
      marks.push(i % 251);
      if (pendingAt === -1 && writer.writableLength !== 0) pendingAt = i;
    }
    expect(pendingAt).toBeGreaterThan(-1);
    const want = marks.length * size;
    const got: Buffer[] = [];
    let n = 0;
    reader.on('data', (d: Buffer) => {
      got.push(d);
      n += d.length;
    });
    reader.resume();
    while (n < want) await once(reader, 'data');
    const all = Buffer.concat(got);
    expect(all.length).toBe(want);
    const bad = marks.findIndex((m, i) => all.subarray(i * size, (i + 1) * size).some((b) => b !== m));
    expect(bad).toBe(-1);
  });

  it('a write larger than the frame gets its own buffer; putLatin1 copies short and long strings', () => {
    const big = frameFor(64 * 1024 + 1);
    expect(big.length).toBe(64 * 1024 + 1);
    expect(frameFor(10)).not.toBe(big);
    const out = frameFor(100);
    const long = 'x'.repeat(40);
    const o = putLatin1(out, long, putLatin1(out, '1a\r\n', 0));
    expect(o).toBe(44);
    expect(out.toString('latin1', 0, o)).toBe(`1a\r\n${long}`);
  });
});
