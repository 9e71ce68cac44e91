// The benchmarks' HAProxy baseline: an HTTP keep-alive proxy with connection reuse, no Nagle delay for SSE.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { start, waitFor } from './proc.js';
import type { Proc } from './proc.js';

/** HAProxy with `threads` threads in front of one upstream, as the benchmarks' baseline; resolves once it forwards /health. */
export async function haproxy(port: number, upstream: number, dir: string, threads: number): Promise<Proc> {
  const cfg = path.join(dir, `haproxy-${port}.cfg`);
  writeFileSync(
    cfg,
    [
      'global',
      '  maxconn 4096',
      `  nbthread ${threads}`,
      'defaults',
      '  mode http',
      '  timeout connect 5s',
      '  timeout client 120s',
      '  timeout server 120s',
      '  option http-keep-alive',
      // without it HAProxy holds small SSE chunks for ~200 ms
      '  option http-no-delay',
      'frontend fe',
      `  bind 127.0.0.1:${port}`,
      '  default_backend be',
      'backend be',
      '  http-reuse always',
      `  server s1 127.0.0.1:${upstream} maxconn 1000`,
      '',
    ].join('\n'),
  );
  const p = start('haproxy', ['-f', cfg, '-db']);
  await waitFor(`http://127.0.0.1:${port}/health`);
  return p;
}
