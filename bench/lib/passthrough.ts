// Baseline for bench:gateway: the plainest undici pass-through proxy (no routing, no measuring).
// Usage: node dist-bench/bench/lib/passthrough.js LISTEN_PORT UPSTREAM_PORT
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [listen, upstream] = process.argv.slice(2).map(Number);
const pool = new Pool(`http://127.0.0.1:${upstream}`, { connections: 128 });
createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    pool
      .request({
        path: req.url ?? '/',
        method: req.method === 'GET' ? 'GET' : 'POST',
        headers: { 'content-type': 'application/json' },
        body: req.method === 'GET' ? null : Buffer.concat(chunks),
      })
      .then(
        async (r) => {
          res.writeHead(r.statusCode, { 'content-type': String(r.headers['content-type'] ?? 'application/json') });
          for await (const c of r.body) res.write(c as Buffer);
          res.end();
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
  });
}).listen(listen, '127.0.0.1');
