// `npm run bench:sim`: streamed tokens/s one simulator process sustains at zero delay, measured
// by a load generator in another process (this one), against a static-SSE baseline in the same run.
//
// Usage: npm run bench:sim [-- --seconds 5 --concurrency 64 --tokens 1000]
// Writes bench/results/sim.md and bench/results/sim.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const ROOT = join(import.meta.dirname, '..');
const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : def;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
  return v;
};

interface Run {
  name: string;
  tokensPerS: number;
  requestsPerS: number;
  mbPerS: number;
  serverCpuPct: number;
  tokensPerServerCpuS: number;
  tokens: number;
  requests: number;
  seconds: number;
}

function cpuTicks(pid: number): number {
  // /proc/<pid>/stat fields 14 and 15: utime and stime in clock ticks
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(rest[11]) + Number(rest[12]);
}
const TICKS_PER_S = 100;

async function startServer(cmd: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(cmd[0]!, cmd.slice(1), { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env });
  const line = await createInterface({ input: child.stdout })[Symbol.asyncIterator]().next();
  const ev = JSON.parse(line.value as string) as { url: string };
  return { child, url: ev.url };
}

const DATA = Buffer.from('data: ');

/** Count SSE events in a stream, carrying partial matches across chunk boundaries. */
function countEvents(buf: Buffer, carry: { tail: Buffer }): number {
  const b = carry.tail.length ? Buffer.concat([carry.tail, buf]) : buf;
  let n = 0;
  let i = b.indexOf(DATA);
  while (i >= 0) {
    n++;
    i = b.indexOf(DATA, i + DATA.length);
  }
  carry.tail = b.subarray(Math.max(0, b.length - (DATA.length - 1)));
  // a match ending inside the tail was counted now; the tail is too short to match again
  return n;
}

async function load(
  name: string,
  url: string,
  pid: number,
  path: string,
  body: object,
  seconds: number,
  concurrency: number,
  eventsPerStream: number,
  tokensPerStream: number,
): Promise<Run> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  const payload = JSON.stringify(body);
  let tokens = 0;
  let bytes = 0;
  let requests = 0;
  let measuring = false;
  let stop = false;
  const one = async (): Promise<void> => {
    const res = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body: payload });
    if (res.statusCode !== 200) throw new Error(`${name}: HTTP ${res.statusCode}: ${await res.body.text()}`);
    const carry = { tail: Buffer.alloc(0) };
    let events = 0;
    for await (const chunk of res.body) {
      const c = chunk as Buffer;
      const n = countEvents(c, carry);
      events += n;
      if (measuring) {
        tokens += n;
        bytes += c.length;
      }
    }
    if (events !== eventsPerStream) throw new Error(`${name}: expected ${eventsPerStream} SSE events per stream, got ${events}`);
    if (measuring) {
      tokens -= eventsPerStream - tokensPerStream; // role chunk and [DONE] are not tokens
      requests++;
    }
  };
  const worker = async () => {
    while (!stop) await one();
  };
  const workers = Array.from({ length: concurrency }, worker);
  await new Promise((r) => setTimeout(r, 1000)); // warm-up
  measuring = true;
  const c0 = cpuTicks(pid);
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const el = (performance.now() - t0) / 1000;
  const c1 = cpuTicks(pid);
  measuring = false;
  stop = true;
  await Promise.all(workers);
  await pool.close();
  const cpuS = (c1 - c0) / TICKS_PER_S;
  return {
    name,
    tokensPerS: Math.round(tokens / el),
    requestsPerS: Math.round((requests / el) * 10) / 10,
    mbPerS: Math.round((bytes / el / 1e6) * 10) / 10,
    serverCpuPct: Math.round((cpuS / el) * 100),
    tokensPerServerCpuS: Math.round(tokens / Math.max(cpuS, 0.01)),
    tokens,
    requests,
    seconds: Math.round(el * 100) / 100,
  };
}

async function main(): Promise<void> {
  const seconds = arg('seconds', 5);
  const concurrency = arg('concurrency', 64);
  const maxTokens = arg('tokens', 1000);
  const simFlags = [
    '--port',
    '0',
    '--prefill-tokens-per-s',
    '1e12',
    '--inter-token-ms',
    '0',
    '--jitter',
    '0',
    '--max-num-seqs',
    '4096',
    '--kv-capacity-tokens',
    '1000000000',
  ];
  const runs: Run[] = [];

  const sim = await startServer([process.execPath, join(ROOT, 'dist/cli/main.js'), 'sim', ...simFlags]);
  try {
    const chatBody = {
      model: 'sim-model',
      messages: [{ role: 'user', content: 'benchmark the simulator' }],
      max_tokens: maxTokens,
      ignore_eos: true,
      temperature: 0,
      stream: true,
    };
    runs.push(
      await load(
        `sim chat stream (${maxTokens} tokens/request)`,
        sim.url,
        sim.child.pid!,
        '/v1/chat/completions',
        chatBody,
        seconds,
        concurrency,
        maxTokens + 2,
        maxTokens,
      ),
    );
    const complBody = { model: 'sim-model', prompt: 'benchmark the simulator', max_tokens: maxTokens, ignore_eos: true, temperature: 0, stream: true };
    runs.push(
      await load(
        `sim completions stream (${maxTokens} tokens/request)`,
        sim.url,
        sim.child.pid!,
        '/v1/completions',
        complBody,
        seconds,
        concurrency,
        maxTokens + 1,
        maxTokens,
      ),
    );
    runs.push(
      await load(
        'sim chat stream (64 tokens/request)',
        sim.url,
        sim.child.pid!,
        '/v1/chat/completions',
        { ...chatBody, max_tokens: 64 },
        seconds,
        concurrency,
        66,
        64,
      ),
    );
  } finally {
    sim.child.kill('SIGTERM');
  }

  const vn = join(ROOT, 'node_modules/.bin/vite-node');
  const base = await startServer([vn, join(ROOT, 'bench/sim.ts'), '--', '--baseline-server', '--tokens', String(maxTokens)]);
  try {
    // the baseline body has a role chunk, maxTokens token chunks and [DONE]
    runs.push(
      await load(
        `baseline: static SSE body (${maxTokens} chunks)`,
        base.url,
        base.child.pid!,
        '/v1/chat/completions',
        {},
        seconds,
        concurrency,
        maxTokens + 2,
        maxTokens,
      ),
    );
  } finally {
    base.child.kill('SIGTERM');
  }

  const meta = {
    date: new Date().toISOString(),
    node: process.version,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    seconds,
    concurrency,
    maxTokens,
    simFlags,
  };
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench/results/sim.json'), `${JSON.stringify({ meta, runs }, null, 2)}\n`);
  const md = [
    '# Simulator streaming throughput (`npm run bench:sim`)',
    '',
    `${meta.date} · node ${meta.node} · ${meta.cpu} × ${meta.cores} (shared; load average ${meta.loadavg}) · ${concurrency} concurrent streams · ${seconds} s per run after 1 s warm-up · loopback`,
    '',
    'One simulator process (`glidepath sim`, zero delay) is driven by an undici load generator in this process, which counts SSE token events. ',
    '"tokens per server CPU-second" divides by the CPU time the server process used, so it reads as tokens/s on one full core.',
    '',
    '| run | tokens/s | requests/s | MB/s | server CPU % | tokens per server CPU-second |',
    '|---|---:|---:|---:|---:|---:|',
    ...runs.map(
      (r) =>
        `| ${r.name} | ${r.tokensPerS.toLocaleString('en-US')} | ${r.requestsPerS} | ${r.mbPerS} | ${r.serverCpuPct} | ${r.tokensPerServerCpuS.toLocaleString('en-US')} |`,
    ),
    '',
    `Simulator flags: \`${simFlags.join(' ')}\``,
    '',
  ].join('\n');
  writeFileSync(join(ROOT, 'bench/results/sim.md'), md);
  process.stdout.write(md);
}

// ---- baseline server mode: a node:http server that writes a precomputed SSE body of the same size
function baselineServer(): void {
  const tokens = arg('tokens', 1000);
  const chunk = (t: string) =>
    `data: {"id":"chatcmpl-0123456789abcdef012345","object":"chat.completion.chunk","created":1700000000,"model":"sim-model","choices":[{"index":0,"delta":{"content":${JSON.stringify(t)}},"logprobs":null,"finish_reason":null}]}\n\n`;
  let body = chunk('');
  for (let i = 0; i < tokens; i++) body += chunk(' word');
  body += 'data: [DONE]\n\n';
  const buf = Buffer.from(body);
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      res.end(buf);
    });
  });
  srv.listen(0, '127.0.0.1', () => {
    const a = srv.address();
    const port = typeof a === 'object' && a ? a.port : 0;
    process.stdout.write(`${JSON.stringify({ event: 'listening', url: `http://127.0.0.1:${port}`, pid: process.pid })}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}

if (process.argv.includes('--baseline-server')) baselineServer();
else await main();
