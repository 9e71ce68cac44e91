// `npm run build`'s second half: bundle the dashboard (web/src, Preact + uPlot) with esbuild into
// dist/web/ — app.js, app.css and index.html, the only files the admin server serves — and print
// their sizes. No source maps, no third-party URL: everything the page loads comes from this origin.
import { copyFileSync, mkdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'dist/web');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  absWorkingDir: root,
  entryPoints: { app: 'web/src/main.tsx' },
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  outdir: out,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(path.join(root, 'web/index.html'), path.join(out, 'index.html'));
const sizes = ['index.html', 'app.js', 'app.css'].map((f) => `${f} ${(statSync(path.join(out, f)).size / 1024).toFixed(1)} KiB`);
console.log(`dashboard: dist/web/ (${sizes.join(', ')})`);
