// The ports rule (DESIGN.md "Ports"): controllers and strategies in src/rollout see the ports and
// nothing else — no import of src/control (the composition root) or src/api (routes live there),
// and no reach-through into the control plane's internals.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROLLOUT = path.join(import.meta.dirname, '../../../src/rollout');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

describe('src/rollout sees only the ports', () => {
  const all = files(ROLLOUT);

  it('imports nothing from src/control or src/api', () => {
    const bad: string[] = [];
    for (const f of all) {
      for (const m of readFileSync(f, 'utf8').matchAll(/^\s*(?:import|export)\b[^'"]*['"]([^'"]+)['"]/gm)) {
        const target = path.resolve(path.dirname(f), m[1] as string);
        const rel = path.relative(path.join(ROLLOUT, '..'), target);
        if (rel.startsWith('control/') || rel.startsWith('api/')) bad.push(`${path.relative(ROLLOUT, f)} → ${m[1]}`);
      }
    }
    expect(bad).toEqual([]);
  });

  it('never reaches into the control plane (cp.dp, cp.store, cp.workers, cp.registry, cp.inventory)', () => {
    const bad = all.filter((f) => /\bcp\.(dp|store|workers|registry|inventory)\b/.test(readFileSync(f, 'utf8'))).map((f) => path.relative(ROLLOUT, f));
    expect(bad).toEqual([]);
    expect(all.length).toBeGreaterThan(10);
  });
});
