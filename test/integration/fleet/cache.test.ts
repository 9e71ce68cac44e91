// WeightCache: real files in a temp directory and a local HTTP server on 127.0.0.1 port 0.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GlidepathError } from '../../../src/errors.js';
import { WeightCache, parseWeightHash, treeHash } from '../../../src/fleet/cache.js';

const sha = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');
let root: string;
let n = 0;
const fresh = (name: string): string => {
  const d = path.join(root, `${name}-${++n}`);
  mkdirSync(d, { recursive: true });
  return d;
};

async function caught(p: Promise<unknown>): Promise<GlidepathError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GlidepathError) return err;
    throw err;
  }
  throw new Error('expected an error');
}

/** Nothing but the published copies and the index: no temp directories left behind. */
function leftovers(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.name.startsWith('.tmp-') || e.name.includes('.tmp-')) out.push(path.join(d, e.name));
      else if (e.isDirectory()) walk(path.join(d, e.name));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

const payload = Buffer.alloc(300_000, 7);
payload.write('glidepath weights', 0);
let server: Server;
let base: string;
beforeAll(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'gp-cache-'));
  server = createServer((req, res: ServerResponse) => {
    const u = req.url ?? '/';
    if (u.startsWith('/w/model.safetensors')) return res.writeHead(200, { 'content-length': payload.length }).end(payload);
    if (u === '/redirect') return res.writeHead(302, { location: '/w/model.safetensors' }).end();
    if (u === '/chunked') {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write(payload.subarray(0, 1_000));
      return res.end();
    }
    if (u === '/short') {
      res.writeHead(200, { 'content-length': 1_000 });
      res.write(payload.subarray(0, 10));
      return res.destroy();
    }
    if (u === '/stall') {
      res.writeHead(200, { 'content-length': 1_000 });
      res.write(payload.subarray(0, 10));
      return; // never finishes
    }
    if (u === '/huge') return res.writeHead(200, { 'content-length': 10_000_000 }).end();
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  rmSync(root, { recursive: true, force: true });
});

describe('WeightCache: local sources', () => {
  it('copies a file, verifies sha256:<hex>, reports bytes, duration and hash', async () => {
    const src = path.join(fresh('src'), 'model.bin');
    writeFileSync(src, 'weights-v1');
    const dir = fresh('cache');
    const c = new WeightCache({ dir });
    const r = await c.download({ model: 'llama', id: 'v1', weights: src, weightHash: `sha256:${sha('weights-v1')}` });
    expect(r).toMatchObject({
      model: 'llama',
      version: 'v1',
      bytes: 10,
      hash: `sha256:${sha('weights-v1')}`,
      verified: true,
      alreadyCached: false,
      evicted: [],
      notes: [],
    });
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
    expect(r.path).toBe(path.join(dir, 'llama', 'v1'));
    expect(readFileSync(path.join(r.path, 'model.bin'), 'utf8')).toBe('weights-v1');
    expect(c.list().map((e) => [e.model, e.version, e.verified])).toEqual([['llama', 'v1', true]]);
  });

  it('copies a directory; its hash is the documented sha256sum-of-sha256sums (checked with coreutils)', async () => {
    const src = fresh('tree');
    mkdirSync(path.join(src, 'sub', 'deep'), { recursive: true });
    writeFileSync(path.join(src, 'config.json'), '{"a":1}');
    writeFileSync(path.join(src, 'sub', 'shard-1.safetensors'), Buffer.alloc(70_000, 1));
    writeFileSync(path.join(src, 'sub', 'deep', 'B'), 'upper');
    writeFileSync(path.join(src, 'a b.txt'), 'space');
    writeFileSync(path.join(src, 'empty'), '');
    const shell = execFileSync('sh', ['-c', `cd "$1" && find . -type f | sed 's|^\\./||' | LC_ALL=C sort | xargs -d '\\n' sha256sum | sha256sum`, 'sh', src], {
      encoding: 'utf8',
    }).split(' ')[0];
    const files = ['config.json', 'sub/shard-1.safetensors', 'sub/deep/B', 'a b.txt', 'empty'].map((rel) => ({
      rel,
      hex: sha(readFileSync(path.join(src, rel))),
    }));
    expect(treeHash(files)).toBe(shell);
    const c = new WeightCache({ dir: fresh('cache') });
    const r = await c.download({ model: 'llama', id: 'v2', weights: pathToFileURL(src).href, weightHash: shell });
    expect(r.hash).toBe(`sha256:${shell}`);
    expect(r.verified).toBe(true);
    expect(r.bytes).toBe(7 + 70_000 + 5 + 5);
    expect(readFileSync(path.join(r.path, 'sub', 'deep', 'B'), 'utf8')).toBe('upper');
  });

  it('follows symlinks (hub caches are made of them)', async () => {
    const blobs = fresh('blobs');
    writeFileSync(path.join(blobs, 'x'), 'blob');
    const snap = fresh('snapshot');
    symlinkSync(path.join(blobs, 'x'), path.join(snap, 'model.bin'));
    const r = await new WeightCache({ dir: fresh('cache') }).download({ model: 'm', id: 'v', weights: snap });
    expect(r.hash).toBe(`sha256:${treeHash([{ rel: 'model.bin', hex: sha('blob') }])}`);
  });

  it('a hash mismatch names both hashes and leaves nothing behind', async () => {
    const src = path.join(fresh('src'), 'model.bin');
    writeFileSync(src, 'tampered');
    const dir = fresh('cache');
    const c = new WeightCache({ dir });
    const want = 'f'.repeat(64);
    const e = await caught(c.download({ model: 'llama', id: 'v3', weights: src, weightHash: want }));
    expect(e.code).toBe('weight_hash_mismatch');
    expect(e.message).toContain(`sha256:${sha('tampered')}`);
    expect(e.message).toContain(`sha256:${want}`);
    expect(existsSync(c.pathOf('llama', 'v3'))).toBe(false);
    expect(leftovers(dir)).toEqual([]);
    expect(c.list()).toEqual([]);
  });

  it('no weight hash: records the computed one and says it was not verified', async () => {
    const src = path.join(fresh('src'), 'w');
    writeFileSync(src, 'x');
    const r = await new WeightCache({ dir: fresh('cache') }).download({ model: 'llama', id: 'v4', weights: src });
    expect(r.verified).toBe(false);
    expect(r.notes).toEqual([`version has no weight_hash: sha256:${sha('x')} was recorded, not verified`]);
  });

  it('refuses what it cannot copy, with codes', async () => {
    const c = new WeightCache({ dir: fresh('cache') });
    expect((await caught(c.download({ model: 'm', id: 'v', weights: 'sim://weights' }))).message).toBe(
      'weights "sim://weights" are simulated: there is nothing to download',
    );
    // the example fleet: simulated weights with a placeholder hash are "nothing to download", not a bad hash
    expect((await caught(c.download({ model: 'm', id: 'v', weights: 'sim://weights', weightHash: 'sha256:1111' }))).code).toBe('unsupported_weights_uri');
    expect((await caught(c.download({ model: 'm', id: 'v', weights: 's3://bucket/x' }))).code).toBe('unsupported_weights_uri');
    expect((await caught(c.download({ model: 'm', id: 'v', weights: path.join(root, 'missing') }))).code).toBe('weights_not_found');
    expect((await caught(c.download({ model: 'm', id: 'v', weights: '/etc/hostname', weightHash: 'md5:abc' }))).code).toBe('invalid_weight_hash');
    expect(parseWeightHash(`SHA256:${'A'.repeat(64)}`)).toBe('a'.repeat(64));
  });

  it('enforces the per-version size limit and cleans up', async () => {
    const src = fresh('big');
    writeFileSync(path.join(src, 'a'), Buffer.alloc(600));
    writeFileSync(path.join(src, 'b'), Buffer.alloc(600));
    const dir = fresh('cache');
    const e = await caught(new WeightCache({ dir, maxBytes: 1_000 }).download({ model: 'm', id: 'v', weights: src }));
    expect(e.code).toBe('weights_too_large');
    expect(leftovers(dir)).toEqual([]);
  });

  it('names with / stay one directory level inside the cache', async () => {
    const src = path.join(fresh('src'), 'w');
    writeFileSync(src, 'x');
    const dir = fresh('cache');
    const r = await new WeightCache({ dir }).download({ model: 'org/llama', id: 'a/../../b', weights: src });
    expect(path.relative(dir, r.path)).toBe(path.join('org%2Fllama', 'a%2F..%2F..%2Fb'));
  });
});

describe('WeightCache: http(s)', () => {
  it('streams to disk, verifies, follows redirects, names the file after the URL', async () => {
    const c = new WeightCache({ dir: fresh('cache') });
    const r = await c.download({ model: 'llama', id: 'h1', weights: `${base}/w/model.safetensors?sig=secret`, weightHash: sha(payload) });
    expect(r).toMatchObject({ bytes: payload.length, verified: true, source: `${base}/w/model.safetensors` });
    expect(readFileSync(path.join(r.path, 'model.safetensors')).equals(payload)).toBe(true);
    const red = await c.download({ model: 'llama', id: 'h2', weights: `${base}/redirect`, weightHash: sha(payload) });
    expect(red.verified).toBe(true);
    expect(readdirSync(red.path)).toEqual(['redirect']);
  });

  it('404, too large (by content-length and by counting), truncated and stalled downloads fail cleanly', async () => {
    const dir = fresh('cache');
    const c = new WeightCache({ dir, maxBytes: 5_000, idleTimeoutMs: 200 });
    expect((await caught(c.download({ model: 'm', id: 'a', weights: `${base}/nope` }))).code).toBe('weights_not_found');
    expect((await caught(c.download({ model: 'm', id: 'b', weights: `${base}/huge` }))).message).toContain(
      "is 10000000 bytes, over the cache's per-version limit of 5000 bytes",
    );
    expect((await caught(c.download({ model: 'm', id: 'c', weights: `${base}/chunked` }))).code).toBe('weights_too_large');
    expect((await caught(c.download({ model: 'm', id: 'd', weights: `${base}/short` }))).code).toMatch(/^download_(failed|truncated)$/);
    const stall = await caught(c.download({ model: 'm', id: 'e', weights: `${base}/stall` }));
    expect(stall.code).toBe('download_timeout');
    expect(stall.message).toContain('went silent for 200 ms after 10 bytes');
    expect(leftovers(dir)).toEqual([]);
    expect(c.list()).toEqual([]);
  });
});

describe('WeightCache: LRU eviction', () => {
  function seeded(over: { protect?: () => Array<{ model: string; version: string }>; maxVersions?: number } = {}) {
    const src = path.join(fresh('src'), 'w');
    writeFileSync(src, 'x');
    let t = 1_000;
    const dir = fresh('cache');
    const c = new WeightCache({ dir, maxVersions: over.maxVersions ?? 2, now: () => ++t, protect: over.protect });
    return { c, dir, src, dl: (id: string) => c.download({ model: 'llama', id, weights: src }) };
  }

  it('evicts the least recently used beyond max_versions; use() refreshes; the index survives a new instance', async () => {
    const { c, dir, dl } = seeded();
    await dl('v1');
    await dl('v2');
    c.use('llama', 'v1'); // v2 is now the least recently used
    const r = await dl('v3');
    expect(r.evicted.map((e) => e.version)).toEqual(['v2']);
    expect(existsSync(c.pathOf('llama', 'v2'))).toBe(false);
    const again = new WeightCache({ dir, maxVersions: 2 });
    expect(again.list().map((e) => e.version)).toEqual(['v1', 'v3']);
    expect(() => again.use('llama', 'v2')).toThrow(/not in the weight cache/);
  });

  it('never evicts the active or standby version; when only protected ones remain it keeps them and says so', async () => {
    const prot = [
      { model: 'llama', version: 'v1' },
      { model: 'llama', version: 'v2' },
    ];
    const { c, dl } = seeded({ protect: () => prot, maxVersions: 1 });
    await dl('v1');
    await dl('v2');
    const r = await dl('v3');
    expect(r.evicted).toEqual([]);
    expect(r.keptProtected.map((k) => k.version).sort()).toEqual(['v1', 'v2', 'v3']);
    expect(r.notes.at(-1)).toMatch(/^only protected versions remain beyond max_versions 1: kept/);
    prot.splice(1, 1); // v2 no longer standby
    const r4 = await dl('v4');
    expect(r4.evicted.map((e) => e.version).sort()).toEqual(['v2', 'v3']);
    expect(
      c
        .list()
        .map((e) => e.version)
        .sort(),
    ).toEqual(['v1', 'v4']);
  });

  it('a cached version with a matching hash is not copied again; concurrent calls share one copy', async () => {
    const { c, src } = seeded({ maxVersions: 5 });
    const v = { model: 'llama', id: 'v1', weights: src, weightHash: sha('x') };
    const [a, b] = await Promise.all([c.download(v), c.download(v)]);
    expect(a).toBe(b);
    const again = await c.download(v);
    expect(again.alreadyCached).toBe(true);
    expect(again.verified).toBe(true);
    const forced = await c.download(v, { force: true });
    expect(forced.alreadyCached).toBe(false);
    expect(readFileSync(path.join(forced.path, 'w'), 'utf8')).toBe('x');
  });
});
