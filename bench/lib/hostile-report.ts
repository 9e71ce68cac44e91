// bench:hostile's report: bench/results/hostile.md (a table per scenario and target, what each
// scenario does, and one finding per scenario worked out from the numbers) and hostile.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CHAT_EVERY_MS, HEALTH_EVERY_MS, RSS_EVERY_MS, STOP_GRACE_MS } from './bystander.js';
import {
  AFTER_MS,
  FLOOD_DRAIN_BOUND_MS,
  FLOOD_HOLD_MS,
  FLOOD_REQUESTS,
  FLOOD_TOKENS,
  QUIET_MS,
  SEND_TIMEOUT_MS,
  SLOW_FAST,
  SLOW_PACED,
  SLOW_POOL,
  SLOW_SETTLE_MS,
  S_FLOOD,
  S_TRICKLE,
  TRICKLE_BODY_BYTES,
  TRICKLE_BOUND_MS,
  TRICKLE_WRITE_BYTES,
  floodRequest,
} from './hostile-settings.js';
import type { Cell, Latency, Target } from './hostile-settings.js';

export function f(n: number, d = 0): string {
  return Number.isFinite(n) ? n.toFixed(d) : '–';
}

function lat(l: Latency | null): string {
  if (l === null) return '–';
  const cut = l.cut > 0 ? ` (${l.cut} unanswered ${STOP_GRACE_MS / 1000} s after the end)` : '';
  const err = l.errors > 0 ? ` (${l.errors} errors)` : '';
  return `${f(l.p50, 1)} / ${f(l.p99, 1)} / ${f(l.max, 0)}${cut}${err} (n=${l.n})`;
}

export function victimText(c: Cell, bound: number): string {
  return c.victimDone ? `${f(c.victimMs / 1000, 2)} s` : `> ${f(bound / 1000, 0)} s (not answered)`;
}

export function extraText(c: Cell): string {
  const e = c.extra;
  if (c.scenario === S_FLOOD)
    return `${e.reachedWorkerDuringHold} of ${FLOOD_REQUESTS} reached the worker during the hold; gateway's kernel send queue to the client then ${f(Number(e.gatewaySendQueueBytesAtHoldEnd) / 1024)} KiB (answers ~${e.answerBytesMean} B each); ${e.answered200} × 200 in all; RSS peak while serving them ${e.rssPeakWhileDrainingMiB} MiB`;
  if (c.scenario === S_TRICKLE) return `status ${e.status}; client done writing after ${f(Number(e.allSentMs) / 1000, 1)} s`;
  return `send timeout ${typeof e.sendTimeoutMs === 'number' ? `${e.sendTimeoutMs} ms` : 'none'}; fired ${e.sendTimeouts}×; victim status ${e.victimStatus}; gateway's kernel send queue to the slow readers ${e.gatewaySendQueueAtVictimSend} when the victim was sent, ${e.gatewaySendQueueAtVictimEnd} when it ended`;
}

export function bound(s: string): number {
  if (s === S_FLOOD) return FLOOD_DRAIN_BOUND_MS;
  if (s === S_TRICKLE) return TRICKLE_BOUND_MS;
  return s === SLOW_FAST.scenario ? SLOW_FAST.boundMs : SLOW_PACED.boundMs;
}

/** One sentence per scenario, from the numbers (so a later run's text matches its table). */
function findings(cells: Cell[], targets: Target[]): string[] {
  const out: string[] = [];
  const by = (s: string) => targets.map((t) => cells.find((c) => c.scenario === s && c.target === t.name)).filter((c): c is Cell => c !== undefined);
  const growth = (c: Cell) => `${f(c.rssPeakMiB - c.rssStartMiB)} MiB`;
  const each = (cs: Cell[], g: (c: Cell) => string) => cs.map((c) => `${g(c)} (${c.target})`).join(' vs ');
  const s1 = by(S_FLOOD);
  if (s1.length)
    out.push(
      `**S1** — requests that reached the worker while the client read nothing: ${each(s1, (c) => `${c.extra.reachedWorkerDuringHold} of ${FLOOD_REQUESTS}`)}; gateway RSS growth over the quiet level: ${each(s1, growth)}; once the client reads, all its answers arrive in ${each(s1, (c) => victimText(c, FLOOD_DRAIN_BOUND_MS))}. At the end of the hold the kernel held ${each(s1, (c) => `${f(Number(c.extra.gatewaySendQueueBytesAtHoldEnd) / 1024)} KiB`)} unsent on the gateway's socket (\`ss\` Send-Q): answers the kernel accepts count as taken by the client, so how many requests get through before the gateway stops reading depends on that buffer (~3.7 MiB on loopback here) and the answers' size.`,
    );
  const s2 = by(S_TRICKLE);
  if (s2.length)
    out.push(
      `**S2** — the 4 MiB body in one-byte chunks was answered after ${each(s2, (c) => victimText(c, TRICKLE_BOUND_MS))}, with RSS growth ${each(s2, growth)} (end ${each(s2, (c) => `${f(c.rssEndMiB)} MiB`)}) and bystander /health p99 ${each(s2, (c) => `${f(c.health.p99, 1)} ms`)}.`,
    );
  for (const v of [SLOW_FAST, SLOW_PACED]) {
    const s3 = by(v.scenario);
    const name = v === SLOW_FAST ? 'S3a' : 'S3b';
    if (s3.length === 0) continue;
    let why = '';
    const timed = s3.filter((c) => typeof c.extra.sendTimeoutMs === 'number' && c.victimDone);
    for (const c of timed) {
      // the victim needs one slot: the first slow reader cut off frees it
      const fill = (c.victimMs + SLOW_SETTLE_MS - SEND_TIMEOUT_MS) / 1000;
      if (fill > 2)
        why += ` On ${c.target} the send timeout could only start once the kernel's send buffer towards a slow reader was full — the gateway's Send-Q was ${c.extra.gatewaySendQueueAtVictimEnd} connections when the victim was answered — which took ~${f(fill, 0)} s of streaming: the victim's wait is that fill time plus the ${SEND_TIMEOUT_MS / 1000} s timeout, not the timeout alone.`;
    }
    out.push(
      `**${name}** — with ${SLOW_POOL} ${v === SLOW_FAST ? 'full-speed' : '1 ms/token'} streams not being read holding the ${SLOW_POOL}-connection pool, one more request for the model was answered after ${each(s3, (c) => victimText(c, v.boundMs))} (send timeout: ${each(s3, (c) => (typeof c.extra.sendTimeoutMs === 'number' ? `${c.extra.sendTimeoutMs} ms` : 'none'))}).${why}`,
    );
  }
  return out;
}

export function report(root: string, cells: Cell[], targets: Target[], startedAt: Date, elapsedMs: number): void {
  const cpu = os.cpus();
  const lines: string[] = [];
  lines.push('# Hostile clients benchmark (issue 12)', '');
  lines.push(
    `Run ${startedAt.toISOString()} on ${cpu.length} × ${cpu[0]?.model ?? 'cpu'} (a **shared 2-core machine**: other engineers' tests were running, so timings are indicative), Node ${process.version}, ${os.platform()} ${os.release()}; the whole run took ${f(elapsedMs / 1000)} s. ` +
      `Each cell is one fresh \`glidepath up\` (the built \`dist/cli/main.js\` run as a script, so its \`#!\` V8 flags apply) with one simulated worker, on 127.0.0.1; scenarios run in turn on each target (S1 on every target, then S2, …). \`npm run bench:hostile\`; add \`GLIDEPATH_CLI_BEFORE=<other checkout>/dist/cli/main.js\` to measure an older build beside this one.`,
    '',
  );
  lines.push('Targets:', '');
  for (const t of targets)
    lines.push(`- **${t.name}**: \`${t.cli}\` at ${t.commit}${t.hasLimits ? '' : ' (no issue-12 config keys: its config omits `send_timeout_ms`)'}`);
  lines.push('');
  lines.push(
    'Columns: gateway RSS (VmRSS sampled every 50 ms) just before the hostile client, its peak, and at the end (1 s after the hostile client has gone); the victim measurement (see below; "> N s" = not answered within the bench\'s bound); a bystander doing `GET /health` every ~10 ms on its own keep-alive connection, and (S1, S2) a small non-streaming chat completion (max_tokens 4) every ~100 ms on another — latency p50 / p99 / max in ms from the hostile client\'s start to the end, a request still waiting at the end counted with its wait so far. Quiet /health p99 is the same bystander during the 1 s before. The bystander and the RSS sampler run in their own thread.',
    '',
  );
  lines.push(
    '| scenario | target | RSS start → peak → end MiB | victim | /health p50 / p99 / max ms | quiet /health p99 ms | chat p50 / p99 / max ms | details |',
  );
  lines.push('|---|---|---|---|---|---|---|---|');
  for (const c of cells) {
    lines.push(
      `| ${c.scenario} | ${c.target} | ${f(c.rssStartMiB)} → ${f(c.rssPeakMiB)} → ${f(c.rssEndMiB)} | ${victimText(c, bound(c.scenario))} | ${lat(c.health)} | ${f(c.healthQuiet.p99, 1)} | ${lat(c.chat)} | ${extraText(c)} |`,
    );
  }
  lines.push('', '## What each scenario does', '');
  lines.push(
    `- **S1** — one connection, paused from the start (the client never reads), gets ${FLOOD_REQUESTS} pipelined streaming chat completions (max_tokens ${FLOOD_TOKENS}, ignore_eos: ~${f((FLOOD_TOKENS * 205) / 1024)} KiB of answer each) in one write (${f((FLOOD_REQUESTS * floodRequest().length) / 1024)} KiB); held ${FLOOD_HOLD_MS / 1000} s; "reached the worker" is the simulator's own \`vllm:request_success_total\` over the hold, the send queue is \`ss\`'s Send-Q of the gateway's socket, and the RSS peak is the peak during the hold (the peak while the answers are then served is in the details). Then the client reads: the victim time is until all ${FLOOD_REQUESTS} answers have arrived (bound ${FLOOD_DRAIN_BOUND_MS / 1000} s). Simulator at zero delay.`,
    `- **S2** — a valid chat completion whose JSON body is ${TRICKLE_BODY_BYTES} bytes (a short prompt, padded with JSON whitespace so the simulator's work is trivial and the time is the gateway's), sent with \`Transfer-Encoding: chunked\` as one-byte chunks (${f((TRICKLE_BODY_BYTES * 6) / 1048576, 1)} MiB on the wire) in ${TRICKLE_WRITE_BYTES / 1024} KiB socket writes; the victim time runs from the first byte sent to the complete answer (bound ${TRICKLE_BOUND_MS / 1000} s). Simulator at zero delay.`,
    `- **S3** — \`gateway.connections_per_worker: ${SLOW_POOL}\` (default 128; smaller to keep the run short on 2 cores — the effect is the same: every connection to the worker is held) and, where the build has it, \`gateway.send_timeout_ms: ${SEND_TIMEOUT_MS}\` (default 60 000). ${SLOW_POOL} clients each start a streaming chat completion (ignore_eos) and never read; ${SLOW_SETTLE_MS} ms later one non-streaming chat completion goes to the same model, and the victim time is until it is answered. **S3a**: simulator at zero delay, max_tokens ${SLOW_FAST.maxTokens} (~${f((SLOW_FAST.maxTokens * 205) / 1048576)} MiB per stream, more than the socket buffers hold), bound ${SLOW_FAST.boundMs / 1000} s. **S3b**: simulator at 1 ms/token (~200 KB/s per stream), max_tokens ${SLOW_PACED.maxTokens} (~${SLOW_PACED.maxTokens / 1000} s of tokens), bound ${SLOW_PACED.boundMs / 1000} s. The send queues are \`ss\`'s Send-Q of the gateway's sockets to the slow readers.`,
    '',
  );
  lines.push('## What it shows', '');
  for (const s of findings(cells, targets)) lines.push(`- ${s}`);
  lines.push('');
  const md = lines.join('\n');
  const outDir = path.join(root, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'hostile.md'), md);
  writeFileSync(
    path.join(outDir, 'hostile.json'),
    JSON.stringify(
      {
        at: startedAt.toISOString(),
        node: process.version,
        cpus: cpu.length,
        cpuModel: cpu[0]?.model ?? '',
        elapsedMs: Math.round(elapsedMs),
        settings: {
          FLOOD_REQUESTS,
          FLOOD_TOKENS,
          FLOOD_HOLD_MS,
          FLOOD_DRAIN_BOUND_MS,
          TRICKLE_BODY_BYTES,
          TRICKLE_WRITE_BYTES,
          TRICKLE_BOUND_MS,
          SLOW_POOL,
          SEND_TIMEOUT_MS,
          SLOW_SETTLE_MS,
          SLOW_FAST,
          SLOW_PACED,
          QUIET_MS,
          AFTER_MS,
          HEALTH_EVERY_MS,
          CHAT_EVERY_MS,
          RSS_EVERY_MS,
        },
        targets,
        cells,
      },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write(md);
}
