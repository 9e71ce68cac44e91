// Regressions from the review of stream resume, on scripted workers: a worker's own error event
// mid-stream (vLLM's and SGLang's on an exception) is a break, not a success; n > 1 with one choice
// finished is not ended as complete; comments and a byte trickle keep no stream open past its
// deadlines; garbage shaped like `{…}` never reaches the client.
import { describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import type { WorkerFault } from '../../../src/telemetry/telemetry.js';
import { httpCall, gatewayFixtures, oneModel } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';
import { closedPort, stream } from '../../helpers/upstream.js';
import type { Behaviour } from '../../helpers/upstream.js';
import { chatEvent, piecesThenDrop, read } from '../../helpers/resume-client.js';

const { upstream, gateway } = gatewayFixtures();
const rr = () => ({ picker: new RoundRobinPicker() });
const CHAT = '/v1/chat/completions';
const ask = (extra: Record<string, unknown> = {}) => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 20, ...extra });

/** vLLM's stream generator on an exception mid-stream: the error as an event, then [DONE]. */
const ERROR_EVENT = `data: ${JSON.stringify({ error: { object: 'error', message: 'EngineCore encountered an issue. See stack trace for the root cause.', type: 'InternalServerError', param: null, code: 500 } })}\n\n`;
const DONE = 'data: [DONE]\n\n';
const finish = (id = 'other') => chatEvent('', { finish_reason: 'stop' }, id);

function watch(gw: Gateway): { recs: RequestRecord[]; faults: WorkerFault[] } {
  const recs: RequestRecord[] = [];
  const faults: WorkerFault[] = [];
  gw.telemetry.subscribe((r) => recs.push(r));
  gw.telemetry.subscribeFaults((f) => faults.push(f));
  return { recs, faults };
}

async function migrations(gw: Gateway): Promise<string[]> {
  const text = await gw.telemetry.metrics.registry.metrics();
  return text.split('\n').filter((l) => l.startsWith('glidepath_stream_migrations_total{'));
}

/** Write `first`, then `next(i)` every `ms` (pacing, not synchronisation) until the gateway hangs up or `times` were written; then drop the connection. */
function thenRepeat(first: string, next: (i: number) => string, ms: number, times: number): Behaviour {
  return async (c) => {
    c.res.writeHead(200, { 'content-type': 'text/event-stream' });
    c.res.flushHeaders();
    if (first !== '') await c.write(first);
    for (let i = 0; i < times; i++) {
      await new Promise((r) => setTimeout(r, ms));
      if (c.res.destroyed) return;
      await c.write(next(i));
    }
    c.res.socket?.destroy();
  };
}

describe("a worker's own error event mid-stream is a break blamed on the worker", () => {
  it('is resumed on another worker: the client gets one whole stream, the worker a fault, the migration its reason (upstream_error)', async () => {
    const a = await upstream();
    const b = await upstream();
    a.script(stream([chatEvent(undefined), chatEvent('Hello'), ERROR_EVENT, DONE]));
    b.script(stream([chatEvent(undefined, {}, 'other'), chatEvent(' world', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, b.url]), {}, rr());
    const { recs, faults } = watch(gw);
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text, got.finish, got.done]).toEqual([[], 'Hello world', 'stop', true]);
    expect(((await b.request(1)).json as { messages: unknown }).messages).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello' },
    ]);
    expect(faults.map((f) => [f.worker, f.code])).toEqual([['v1-w0', 'upstream_error']]);
    expect(recs.at(-1)).toMatchObject({ status: 200, errorCode: undefined });
    expect(await migrations(gw)).toEqual([expect.stringMatching(/reason="upstream_error",outcome="resumed"\} 1$/)]);
  });

  it("that cannot be resumed ends with the catalogue's error event naming the worker's message (not [DONE] as a success)", async () => {
    const a = await upstream();
    a.script(stream([chatEvent(undefined), chatEvent('Hello'), ERROR_EVENT, DONE]));
    const gw = await gateway(oneModel([a.url]), {}, rr());
    const { recs } = watch(gw);
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect(got.text).toBe('Hello');
    expect(got.errors).toHaveLength(1);
    const e = got.errors[0] as { code: string; message: string };
    expect(e.code).toBe('upstream_error');
    expect(e.message).toContain('worker v1-w0 sent an error event mid-stream: EngineCore encountered an issue. See stack trace for the root cause. (code 500)');
    expect(e.message).toContain('(not resumed: no other worker of the version could take it)');
    expect(recs.at(-1)).toMatchObject({ status: 200, errorCode: 'upstream_error' });
  });

  it('in a continuation (an event with no choices, once taken for the closing usage event and dropped), it breaks again and the next worker continues', async () => {
    const a = await upstream();
    const b = await upstream();
    const c = await upstream();
    a.script(piecesThenDrop([Buffer.from(chatEvent(undefined) + chatEvent('Hello'))]));
    b.script(stream([chatEvent(undefined, {}, 'b'), chatEvent(' wor', {}, 'b'), ERROR_EVENT, DONE]));
    c.script(stream([chatEvent(undefined, {}, 'c'), chatEvent('ld', {}, 'c'), finish('c'), DONE]));
    const gw = await gateway(oneModel([a.url, b.url, c.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text, got.finish, got.done]).toEqual([[], 'Hello world', 'stop', true]);
    const asked = (await c.request(1)).json as { messages: { content: string }[]; max_tokens: number };
    expect(asked.messages.at(-1)?.content).toBe('Hello wor');
    expect(asked.max_tokens).toBe(18);
  });
});

describe('n > 1: one choice finished is not the end of the stream', () => {
  const choice = (index: number, content: string | undefined, fin: string | null = null) => chatEvent(content, { index, finish_reason: fin });

  it('a worker that dies while choice 1 still generates: the client gets the error event saying why it was not resumed', async () => {
    const a = await upstream();
    const b = await upstream();
    a.script(
      piecesThenDrop([Buffer.from(choice(0, undefined) + choice(1, undefined) + choice(0, 'A') + choice(1, 'B') + choice(0, '', 'stop') + choice(1, 'C'))]),
    );
    const gw = await gateway(oneModel([a.url, b.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, ask({ n: 2 }))).body, true);
    expect(got.errors).toHaveLength(1);
    expect((got.errors[0] as { message: string }).message).toMatch(/\(not resumed: .*n > 1/);
    expect(b.requests).toHaveLength(0);
  });

  it('a worker that dies after every choice finished (no usage asked): the stream is ended with [DONE]', async () => {
    const a = await upstream();
    a.script(piecesThenDrop([Buffer.from(choice(0, undefined) + choice(1, undefined) + choice(0, 'A', 'stop') + choice(1, 'B', 'stop'))]));
    const gw = await gateway(oneModel([a.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, ask({ n: 2 }))).body, true);
    expect([got.errors, got.text, got.done]).toEqual([[], 'AB', true]);
  });
});

describe('the deadlines count from whole data events: comments and a trickle of bytes keep no stream open', () => {
  it('a worker that sends only `: ping` comments after its last token is idle (idle_timeout_ms): resumed elsewhere', async () => {
    const a = await upstream();
    const b = await upstream();
    a.script(thenRepeat(chatEvent(undefined) + chatEvent('Hello'), () => ': ping\n\n', 25, 80));
    b.script(stream([chatEvent(undefined, {}, 'other'), chatEvent(' world', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, b.url]), { idleTimeoutMs: 300 }, rr());
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text]).toEqual([[], 'Hello world']);
    expect(await migrations(gw)).toEqual([expect.stringMatching(/reason="upstream_idle_timeout",outcome="resumed"\} 1$/)]);
  });

  it('a worker that sends an event one byte at a time is idle too; the half-sent event never reaches the client', async () => {
    const a = await upstream();
    const b = await upstream();
    const slow = chatEvent(' there');
    a.script(thenRepeat(chatEvent(undefined) + chatEvent('Hello'), (i) => slow[i % slow.length] as string, 25, 80));
    b.script(stream([chatEvent(undefined, {}, 'other'), chatEvent(' world', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, b.url]), { idleTimeoutMs: 300 }, rr());
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text]).toEqual([[], 'Hello world']);
    expect(await migrations(gw)).toEqual([expect.stringMatching(/reason="upstream_idle_timeout",outcome="resumed"\} 1$/)]);
  });

  it('a worker that sends only comments before its first data event misses the first-token deadline: asked again elsewhere as it was', async () => {
    const a = await upstream();
    const b = await upstream();
    a.script(thenRepeat('', () => ': ping\n\n', 25, 80));
    b.script(stream([chatEvent(undefined, {}, 'other'), chatEvent('Hello', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, b.url]), { firstTokenTimeoutMs: 300 }, rr());
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text, got.roles]).toEqual([[], 'Hello', 1]);
    expect(((await b.request(1)).json as { messages: unknown[] }).messages).toHaveLength(1);
    expect(await migrations(gw)).toEqual([expect.stringMatching(/reason="upstream_timeout",outcome="resumed"\} 1$/)]);
  });
});

describe('garbage shaped like a JSON object', () => {
  it('`data: {garbage}` mid-stream is a malformed event, never forwarded: resumed elsewhere', async () => {
    const a = await upstream();
    const b = await upstream();
    a.script(stream([chatEvent(undefined), chatEvent('Hello'), 'data: {garbage}\n\n', chatEvent(' never'), DONE]));
    b.script(stream([chatEvent(undefined, {}, 'other'), chatEvent(' world', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, b.url]), {}, rr());
    const res = await httpCall(gw.url, CHAT, ask());
    expect(res.body).not.toContain('garbage');
    const got = read(res.body, true);
    expect([got.errors, got.text, got.finish]).toEqual([[], 'Hello world', 'stop']);
    expect(await migrations(gw)).toEqual([expect.stringMatching(/reason="upstream_malformed_stream",outcome="resumed"\} 1$/)]);
  });
});

describe('a continuation whose connect is refused', () => {
  // regression: the refused connect (a worker killed and not yet noticed) was taken for a second break,
  // spending a migration: with max_migrations 1 the stream ended with an error though a worker could continue it
  it('goes to another worker without spending a migration', async () => {
    const a = await upstream();
    const c = await upstream();
    // a port nothing listens on (a worker killed, not yet noticed)
    const goneUrl = `http://127.0.0.1:${await closedPort()}`;
    a.script(stream([chatEvent(undefined), chatEvent('Hello')]));
    c.script(stream([chatEvent(undefined, {}, 'other'), chatEvent(' world', {}, 'other'), finish(), DONE]));
    const gw = await gateway(oneModel([a.url, goneUrl, c.url]), { resume: { maxMigrations: 1, budgetMs: 60_000, logBytes: 65_536 } }, rr());
    const got = read((await httpCall(gw.url, CHAT, ask())).body, true);
    expect([got.errors, got.text, got.finish, got.done]).toEqual([[], 'Hello world', 'stop', true]);
    expect(await migrations(gw)).toEqual([expect.stringMatching(/outcome="resumed"\} 1$/)]);
  });
});
