// The dashboard's built front end (dist/web/, made by `npm run build`) held in memory and served by
// exact file name only — no path is ever joined from a request, so no traversal is possible — with
// the security headers every dashboard response carries (strict CSP: nothing but this origin).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import path from 'node:path';

/** Nothing but this origin: no inline script or style, no third-party request, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=()',
};

export function setSecurityHeaders(res: ServerResponse): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
};

/** The only names served: one flat folder of plain file names (no dot files, no separators). */
const NAME = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;

export interface StaticFile {
  body: Buffer;
  type: string;
  etag: string;
}

/** Where `npm run build` puts the bundle, seen from this module compiled (dist/api/) or run from source (src/api/). */
export function defaultWebRoot(here: string = import.meta.dirname): string {
  const candidates = [path.join(here, '../web'), path.join(here, '../../dist/web')];
  return candidates.find((d) => existsSync(path.join(d, 'index.html'))) ?? (candidates[1] as string);
}

export class StaticBundle {
  private files: Map<string, StaticFile> | undefined;
  private loadedFrom = 0;

  constructor(readonly dir: string) {}

  /** The file of that exact name, or undefined; null when the bundle was not built at all. */
  file(name: string): StaticFile | undefined | null {
    const files = this.load();
    if (files === undefined) return null;
    if (!NAME.test(name)) return undefined;
    return files.get(name);
  }

  /** Read the folder once; again when index.html changed (a rebuild while running). */
  private load(): Map<string, StaticFile> | undefined {
    const index = path.join(this.dir, 'index.html');
    let mtime: number;
    try {
      mtime = statSync(index).mtimeMs;
    } catch {
      this.files = undefined;
      return undefined;
    }
    if (this.files !== undefined && mtime === this.loadedFrom) return this.files;
    const files = new Map<string, StaticFile>();
    for (const e of readdirSync(this.dir, { withFileTypes: true })) {
      const type = TYPES[path.extname(e.name)];
      if (!e.isFile() || !NAME.test(e.name) || type === undefined) continue;
      const body = readFileSync(path.join(this.dir, e.name));
      files.set(e.name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
    }
    this.files = files;
    this.loadedFrom = mtime;
    return files;
  }
}
