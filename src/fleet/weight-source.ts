// Getting a version's weights into a directory: where they come from (a path, file://, http(s)://), copied or fetched under a byte budget and timeouts, hashed as they pass (the hashes are documented in cache.ts).
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { Agent, interceptors, request } from 'undici';
import type { Dispatcher } from 'undici';
import { DEFAULTS } from '../defaults.js';
import { BadRequestError, GatewayTimeoutError, GlidepathError, NotFoundError, UnprocessableError, UpstreamError } from '../errors.js';
import { redactUrl } from '../http/url.js';

/** Bytes written so far for one version, against its limit. */
export interface Budget {
  used: number;
  max: number;
}

/** A download's limits: the whole of it, and silence between two pieces. */
export interface FetchTimeouts {
  timeoutMs: number;
  idleTimeoutMs: number;
}

/** `sha256:<hex>` / bare hex → lowercase hex, or an error message. */
export function parseWeightHash(h: string): string | { error: string } {
  const hex = h
    .trim()
    .toLowerCase()
    .replace(/^sha256:/, '');
  if (!/^[0-9a-f]{64}$/.test(hex)) return { error: `weight_hash ${JSON.stringify(h)} is not a SHA-256 (expected sha256:<64 hex digits> or 64 hex digits)` };
  return hex;
}

/** Local paths are shown as they are; http(s) sources go through the one URL redaction. */
export function redactSource(uri: string): string {
  return /^https?:\/\//i.test(uri) ? redactUrl(uri) : uri;
}

export type Source = { kind: 'local'; path: string } | { kind: 'http'; url: string };

export function classify(uri: string, baseDir: string): Source {
  if (/^https?:\/\//i.test(uri)) return { kind: 'http', url: uri };
  if (/^file:/i.test(uri)) {
    try {
      return { kind: 'local', path: fileURLToPath(uri) };
    } catch (err) {
      throw new BadRequestError('invalid_weights_uri', `weights ${JSON.stringify(uri)} is not a valid file:// URL: ${(err as Error).message}`);
    }
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri);
  if (scheme) {
    throw new BadRequestError(
      'unsupported_weights_uri',
      scheme[1]?.toLowerCase() === 'sim'
        ? `weights ${JSON.stringify(uri)} are simulated: there is nothing to download`
        : `weights ${JSON.stringify(uri)}: scheme ${scheme[1]}:// is not supported (use a path, file://, http:// or https://)`,
    );
  }
  return { kind: 'local', path: path.resolve(baseDir, uri) };
}

/** Counts bytes against the limit and the running hash as they pass. */
class Meter extends Transform {
  readonly hash = createHash('sha256');
  bytes = 0;
  constructor(
    private readonly budget: { used: number; max: number },
    private readonly what: string,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    this.budget.used += chunk.length;
    if (this.budget.used > this.budget.max) {
      cb(new UnprocessableError('weights_too_large', `${this.what}: weights exceed the cache's per-version limit of ${this.budget.max} bytes`));
      return;
    }
    this.hash.update(chunk);
    cb(null, chunk);
  }
}

/** Regular files under `root` (symlinks followed, cycles refused), relative POSIX paths, sorted bytewise. */
async function listTree(root: string): Promise<string[]> {
  const out: string[] = [];
  const seen = new Set<string>();
  const walk = async (abs: string, rel: string): Promise<void> => {
    const real = await realpath(abs);
    if (seen.has(real)) throw new BadRequestError('weights_symlink_cycle', `weights directory has a symlink cycle at ${rel || '.'}`);
    seen.add(real);
    for (const name of await readdir(abs)) {
      const a = path.join(abs, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = await stat(a);
      if (st.isDirectory()) await walk(a, r);
      else if (st.isFile()) out.push(r);
      else throw new BadRequestError('weights_special_file', `weights directory holds ${r}, which is neither a file nor a directory`);
    }
    seen.delete(real);
  };
  await walk(root, '');
  return out.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/** The directory hash documented at the top of this file, from per-file hashes. */
export function treeHash(files: ReadonlyArray<{ rel: string; hex: string }>): string {
  const sorted = [...files].sort((a, b) => Buffer.compare(Buffer.from(a.rel), Buffer.from(b.rel)));
  const h = createHash('sha256');
  for (const f of sorted) h.update(`${f.hex}  ${f.rel}\n`);
  return h.digest('hex');
}

/** A safe file name for an http download: the URL path's last segment. */
function fileNameOf(url: string): string {
  let base = '';
  try {
    base = decodeURIComponent(path.posix.basename(new URL(url).pathname));
  } catch {
    base = '';
  }
  base = base.replace(/[^A-Za-z0-9._-]/g, '_');
  return base === '' || /^\.+$/.test(base) ? 'weights' : base;
}

export async function copyLocal(src: string, tmp: string, budget: Budget, signal: AbortSignal, what: string): Promise<string> {
  let st;
  try {
    st = await stat(src);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NotFoundError('weights_not_found', `${what}: weights ${src} do not exist`);
    throw new BadRequestError('weights_unreadable', `${what}: cannot read weights ${src}: ${(err as Error).message}`);
  }
  if (st.isFile()) return copyFile(src, path.join(tmp, path.basename(src)), budget, signal, what);
  if (!st.isDirectory()) throw new BadRequestError('weights_special_file', `${what}: weights ${src} are neither a file nor a directory`);
  const files = await listTree(src);
  const hashes: Array<{ rel: string; hex: string }> = [];
  for (const rel of files) {
    const to = path.join(tmp, ...rel.split('/'));
    await mkdir(path.dirname(to), { recursive: true });
    hashes.push({ rel, hex: await copyFile(path.join(src, ...rel.split('/')), to, budget, signal, what) });
  }
  return treeHash(hashes);
}

async function copyFile(from: string, to: string, budget: Budget, signal: AbortSignal, what: string): Promise<string> {
  const meter = new Meter(budget, what);
  await pipeline(createReadStream(from), meter, createWriteStream(to, { flags: 'wx' }), { signal });
  return meter.hash.digest('hex');
}

export async function fetchHttp(url: string, tmp: string, budget: Budget, signal: AbortSignal, what: string, t: FetchTimeouts): Promise<string> {
  // one agent per download: redirects followed (model hubs redirect to CDNs), sockets closed after
  const agent = new Agent();
  try {
    return await fetchWith(agent.compose(interceptors.redirect({ maxRedirections: DEFAULTS.control.cacheMaxRedirects })), url, tmp, budget, signal, what, t);
  } finally {
    await agent.close().catch(() => undefined);
  }
}

async function fetchWith(
  dispatcher: Dispatcher,
  url: string,
  tmp: string,
  budget: Budget,
  signal: AbortSignal,
  what: string,
  t: FetchTimeouts,
): Promise<string> {
  const safe = redactSource(url);
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, { method: 'GET', dispatcher, headersTimeout: t.idleTimeoutMs, bodyTimeout: t.idleTimeoutMs, signal });
  } catch (err) {
    if (signal.aborted) throw new GatewayTimeoutError('download_timeout', `${what}: ${safe} did not answer within ${t.timeoutMs} ms`);
    const e = err as Error & { code?: string };
    if (e.code === 'UND_ERR_HEADERS_TIMEOUT')
      throw new GatewayTimeoutError('download_timeout', `${what}: ${safe} sent no headers within ${t.idleTimeoutMs} ms`);
    throw new UpstreamError('download_failed', `${what}: GET ${safe} failed: ${e.message}`);
  }
  const body: Readable = res.body;
  if (res.statusCode < 200 || res.statusCode >= 300) {
    await res.body.dump().catch(() => undefined);
    if (res.statusCode === 404) throw new NotFoundError('weights_not_found', `${what}: GET ${safe} answered 404`);
    throw new UpstreamError('download_failed', `${what}: GET ${safe} answered HTTP ${res.statusCode}`);
  }
  const len = Number(res.headers['content-length']);
  if (Number.isFinite(len) && len > budget.max) {
    res.body.destroy();
    throw new UnprocessableError('weights_too_large', `${what}: ${safe} is ${len} bytes, over the cache's per-version limit of ${budget.max} bytes`);
  }
  const meter = new Meter(budget, what);
  try {
    await pipeline(body, meter, createWriteStream(path.join(tmp, fileNameOf(url)), { flags: 'wx' }), { signal });
  } catch (err) {
    if (err instanceof GlidepathError) throw err;
    const e = err as Error & { code?: string };
    if (e.code === 'UND_ERR_BODY_TIMEOUT')
      throw new GatewayTimeoutError('download_timeout', `${what}: ${safe} went silent for ${t.idleTimeoutMs} ms after ${meter.bytes} bytes`);
    if (signal.aborted) throw err;
    throw new UpstreamError('download_failed', `${what}: reading ${safe} failed after ${meter.bytes} bytes: ${e.message}`);
  }
  if (Number.isFinite(len) && meter.bytes !== len)
    throw new UpstreamError('download_truncated', `${what}: ${safe} announced ${len} bytes but sent ${meter.bytes}`);
  return meter.hash.digest('hex');
}
