import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GATEWAY_NODE_FLAGS, missingNodeFlags } from '../../../src/cli/up/node-flags.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const MAIN = path.join(ROOT, 'dist/cli/main.js');

describe('the gateway V8 heap flags', () => {
  it('the #! line of the glidepath command carries exactly GATEWAY_NODE_FLAGS', () => {
    const first = readFileSync(path.join(ROOT, 'src/cli/main.ts'), 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${GATEWAY_NODE_FLAGS.join(' ')}`);
  });

  it('finds flags given on the command line or in NODE_OPTIONS, by name, with _ or -', () => {
    expect(missingNodeFlags([], undefined)).toEqual([...GATEWAY_NODE_FLAGS]);
    expect(missingNodeFlags(['--initial-old-space-size=512'], undefined)).toEqual([]);
    expect(missingNodeFlags([], '--max-old-space-size=4096 --initial_old_space_size=64')).toEqual([]);
    expect(missingNodeFlags(['--inspect'], '--max-old-space-size=4096')).toEqual(['--initial-old-space-size=128']);
  });

  it('`up` warns when node runs it without them, not when the command runs itself', () => {
    const env = { ...process.env, NODE_OPTIONS: '' };
    const viaNode = spawnSync(process.execPath, [MAIN, 'up', '--config', '/nonexistent/glidepath.yaml'], { encoding: 'utf8', env });
    expect(viaNode.status).not.toBe(0);
    expect(viaNode.stderr).toContain('warning: node was started without --initial-old-space-size=128');
    const direct = spawnSync(MAIN, ['up', '--config', '/nonexistent/glidepath.yaml'], { encoding: 'utf8', env });
    expect(direct.status).not.toBe(0);
    expect(direct.stderr).toContain('/nonexistent/glidepath.yaml');
    expect(direct.stderr).not.toContain('warning');
  });
});
