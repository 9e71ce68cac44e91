// Resuming broken streams on another worker: against simulators (a worker that crashes, stalls or
// sends garbage mid-stream; the client's stream must equal an unbroken one), and against scripted
// workers (the continuation request itself, UTF-8 cut between reads, a stop string across the
// break, what cannot be resumed).
import { afterEach, describe, expect, it } from 'vitest';
import { RoundRobinPicker } from '../../../src/gateway/pick.js';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';
import type { SimFaultSpec } from '../../../src/config/sim-faults.js';
import type { RequestRecord } from '../../../src/telemetry/record.js';
import { httpCall, sseData, gatewayFixtures, oneModel } from '../../helpers/gateway.js';
import type { Gateway } from '../../helpers/gateway.js';
import { status, stream } from '../../helpers/upstream.js';
import { ID, chatEvent, piecesThenDrop, read } from '../../helpers/resume-client.js';

const { upstream, gateway } = gatewayFixtures();
const sims: SimHandle[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});
const rr = () => ({ picker: new RoundRobinPicker() });

async function sim(faults: SimFaultSpec = {}): Promise<SimHandle> {
  const s = await startSim({ model: 'm', version: 'v1', seed: 11, interTokenMs: 0, jitter: 0, faults });
  sims.push(s);
  return s;
}

function records(gw: Gateway): RequestRecord[] {
  const out: RequestRecord[] = [];
  gw.telemetry.subscribe((r) => out.push(r));
  return out;
}

const CHAT = '/v1/chat/completions';
const COMPL = '/v1/completions';
const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: 'm',
  messages: [{ role: 'user', content: 'Tell me how canaries keep rollouts safe.' }],
  stream: true,
  temperature: 0,
  max_tokens: 48,
  stream_options: { include_usage: true },
  ...extra,
});
const complBody = (extra: Record<string, unknown> = {}) => ({
  model: 'm',
  prompt: 'Once upon a time',
  stream: true,
  temperature: 0,
  max_tokens: 40,
  stream_options: { include_usage: true },
  ...extra,
});

describe('a stream broken by its worker continues on another worker of the version', () => {
  for (const [fault, cfg] of [
    ['crashes (connection dropped)', {}],
    ['stalls (idle timeout)', { idleTimeoutMs: 300 }],
    ['sends garbage', {}],
  ] as const) {
    for (const [kind, path, body] of [
      ['chat', CHAT, chatBody()],
      ['completions', COMPL, complBody()],
    ] as const) {
      it(`${kind}: a worker that ${fault} after 7 tokens; the client's stream equals an unbroken one`, async () => {
        const faults: SimFaultSpec =
          fault === 'stalls (idle timeout)' ? { stallAfterTokens: 7 } : fault === 'sends garbage' ? { garbageAfterTokens: 7 } : { crashAfterTokens: 7 };
        const bad = await sim(faults);
        const good = await sim();
        const gw = await gateway(oneModel([bad.url, good.url]), { ...cfg }, rr());
        const recs = records(gw);
        const reference = read((await httpCall(good.url, path, body)).body, kind === 'chat');
        const res = await httpCall(gw.url, path, body);
        expect(res.status).toBe(200);
        const got = read(res.body, kind === 'chat');
        expect(got.errors).toEqual([]);
        expect(got.text).toBe(reference.text);
        expect(got.text.length).toBeGreaterThan(0);
        expect(got.finish).toBe(reference.finish);
        expect(got.usage).toEqual(reference.usage);
        expect(got.ids.size).toBe(1);
        expect(got.created.size).toBe(1);
        expect(got.roles).toBe(kind === 'chat' ? 1 : 0);
        expect(got.done).toBe(true);
        const rec = recs.at(-1) as RequestRecord;
        expect(rec.errorCode).toBeUndefined();
        expect(rec.promptTokens).toBe(reference.usage?.prompt_tokens);
        expect(rec.completionTokens).toBe(reference.usage?.completion_tokens);
        const metrics = await gw.telemetry.metrics.registry.metrics();
        expect(metrics).toMatch(/glidepath_stream_migrations_total\{[^}]*outcome="resumed"[^}]*\} 1/);
        expect(metrics).toMatch(/glidepath_stream_migration_stall_seconds_count\{model="m",version="v1"\} 1/);
      });
    }
  }

  it('a stop string that the broken worker had begun is found by the worker that continues', async () => {
    const good = await sim();
    // the unbroken answer's text; the stop string is the end of its 8th token and the start of its 9th
    const plain = read((await httpCall(good.url, CHAT, chatBody())).body, true).text;
    const words = plain.match(/\s*\S+/g) as string[];
    const head = words.slice(0, 8).join('');
    const stop = head.slice(-3) + (words[8] as string).slice(0, 3);
    const body = chatBody({ stop: [stop] });
    const reference = read((await httpCall(good.url, CHAT, body)).body, true);
    const bad = await sim({ crashAfterTokens: 6 });
    const gw = await gateway(oneModel([bad.url, good.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, body)).body, true);
    expect(got.errors).toEqual([]);
    expect(got.text).toBe(reference.text);
    expect(got.finish).toBe('stop');
    expect(got.usage).toEqual(reference.usage);
  });

  it('migrates again when the continuing worker breaks too, up to gateway.resume.max_migrations', async () => {
    const a = await sim({ crashAfterTokens: 5 });
    const b = await sim({ crashAfterTokens: 5 });
    const c = await sim();
    const reference = read((await httpCall(c.url, CHAT, chatBody())).body, true);
    const gw = await gateway(oneModel([a.url, b.url, c.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, chatBody())).body, true);
    expect(got.errors).toEqual([]);
    expect(got.text).toBe(reference.text);
    expect(got.usage).toEqual(reference.usage);

    const gw1 = await gateway(oneModel([a.url, b.url, c.url]), { resume: { maxMigrations: 1, budgetMs: 60_000, logBytes: 65_536 } }, rr());
    const once = read((await httpCall(gw1.url, CHAT, chatBody())).body, true);
    expect(once.errors).toHaveLength(1);
    expect(JSON.stringify(once.errors[0])).toContain('not resumed: it broke 2 times (gateway.resume.max_migrations: 1)');
    expect(reference.text.startsWith(once.text)).toBe(true);
  });

  it('with resumption off (max_migrations 0) a broken stream ends with its error, as before', async () => {
    const bad = await sim({ crashAfterTokens: 5 });
    const good = await sim();
    const gw = await gateway(oneModel([bad.url, good.url]), { resume: { maxMigrations: 0, budgetMs: 60_000, logBytes: 65_536 } }, rr());
    const got = read((await httpCall(gw.url, CHAT, chatBody())).body, true);
    expect(got.errors).toHaveLength(1);
    expect((got.errors[0] as { code: string }).code).toBe('upstream_stream_broken');
  });
});

// ---- scripted workers ------------------------------------------------------------------------

/** Cut `s`'s bytes inside every multi-byte character. */
function cutInsideCharacters(s: string): Buffer[] {
  const b = Buffer.from(s);
  const out: Buffer[] = [];
  let from = 0;
  for (let i = 1; i < b.length; i++) {
    // a continuation byte (10xxxxxx): cut just before it, inside the character
    if (((b[i] as number) & 0xc0) === 0x80 && ((b[i - 1] as number) & 0xc0) !== 0x80) {
      out.push(b.subarray(from, i));
      from = i;
    }
  }
  out.push(b.subarray(from));
  return out;
}

describe('the continuation, on scripted workers', () => {
  it('asks for the partial assistant message with continue_final_message; cut UTF-8 and half an event never reach the client', async () => {
    const first = await upstream();
    const second = await upstream();
    const sent = chatEvent(undefined) + chatEvent('Caf') + chatEvent('é a') + chatEvent('u ');
    // the worker dies inside the next event
    first.script(piecesThenDrop([...cutInsideCharacters(sent), Buffer.from(chatEvent('la').slice(0, 30))]));
    const cont =
      chatEvent(undefined, {}, 'chatcmpl-other', 1800000000) +
      chatEvent('lait ☕', {}, 'chatcmpl-other', 1800000000) +
      chatEvent('', { finish_reason: 'stop' }, 'chatcmpl-other', 1800000000) +
      `data: ${JSON.stringify({ id: 'chatcmpl-other', object: 'chat.completion.chunk', created: 1800000000, model: 'm', choices: [], usage: { prompt_tokens: 13, completion_tokens: 2, total_tokens: 15 } })}\n\n` +
      'data: [DONE]\n\n';
    second.script(piecesThenDrop(cutInsideCharacters(cont), 'end'));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const body = {
      model: 'm',
      messages: [{ role: 'user', content: 'coffee?' }],
      stream: true,
      max_tokens: 20,
      stop: ['zzz'],
      stream_options: { include_usage: true },
    };
    const res = await httpCall(gw.url, CHAT, body);
    const got = read(res.body, true);
    expect(got.errors).toEqual([]);
    expect(got.text).toBe('Café au lait ☕');
    expect([...got.ids]).toEqual([ID]);
    expect([...got.created]).toEqual([1700000000]);
    expect(got.roles).toBe(1);
    // 3 tokens were sent before the break: the original prompt is 13 - 3, the completion 3 + 2
    expect(got.usage).toEqual({ prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
    const asked = (await second.request(1)).json as Record<string, unknown>;
    expect(asked.messages).toEqual([
      { role: 'user', content: 'coffee?' },
      { role: 'assistant', content: 'Café au ' },
    ]);
    expect(asked.continue_final_message).toBe(true);
    expect(asked.add_generation_prompt).toBe(false);
    expect(asked.max_tokens).toBe(17);
    expect(asked.stop).toEqual(['zzz']);
    expect(asked.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
  });

  it('ends the stream at a stop string that starts before the break and ends after it (an engine that does not hold text back)', async () => {
    const first = await upstream();
    const second = await upstream();
    first.script(piecesThenDrop([Buffer.from(chatEvent(undefined) + chatEvent('Hello') + chatEvent(' wor'))]));
    second.script(stream([chatEvent(undefined, {}, 'x'), chatEvent('ld and', {}, 'x'), chatEvent(' more', {}, 'x'), 'data: [DONE]\n\n']));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const res = await httpCall(gw.url, CHAT, { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stop: ['world'] });
    const got = read(res.body, true);
    expect(got.errors).toEqual([]);
    // " wor" was already sent; nothing after it is
    expect(got.text).toBe('Hello wor');
    expect(got.finish).toBe('stop');
    expect(got.done).toBe(true);
  });

  it('a stream that broke before any text is asked again as it was (no empty assistant message), and keeps its one role event', async () => {
    const first = await upstream();
    const second = await upstream();
    first.script(piecesThenDrop([Buffer.from(chatEvent(undefined))]));
    second.script(stream([chatEvent(undefined, {}, 'y'), chatEvent('Hello', {}, 'y'), chatEvent('', { finish_reason: 'stop' }, 'y'), 'data: [DONE]\n\n']));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 9 })).body, true);
    expect(got.errors).toEqual([]);
    expect([got.text, got.roles, [...got.ids]]).toEqual(['Hello', 1, [ID]]);
    const asked = (await second.request(1)).json as Record<string, unknown>;
    expect(asked.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(asked.continue_final_message).toBeUndefined();
    expect(asked.max_tokens).toBe(9);
  });

  it('a worker that broke inside its first event: the client gets the continuation role event (it never had one)', async () => {
    const first = await upstream();
    const second = await upstream();
    first.script(piecesThenDrop([Buffer.from(chatEvent(undefined).slice(0, 40))]));
    second.script(stream([chatEvent(undefined, {}, 'z'), chatEvent('Hi', {}, 'z'), chatEvent('', { finish_reason: 'stop' }, 'z'), 'data: [DONE]\n\n']));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })).body, true);
    expect([got.errors, got.text, got.roles, got.done]).toEqual([[], 'Hi', 1, true]);
  });

  it('completions continue from prompt + text, with the rest of the budget', async () => {
    const first = await upstream();
    const second = await upstream();
    const ev = (text: string, fin: string | null = null) =>
      `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'm', choices: [{ index: 0, text, logprobs: null, finish_reason: fin }] })}\n\n`;
    first.script(piecesThenDrop([Buffer.from(ev(' one') + ev(' two'))]));
    second.script(stream([ev(' three'), ev('', 'length'), 'data: [DONE]\n\n']));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const res = await httpCall(gw.url, COMPL, { model: 'm', prompt: 'Count:', stream: true, max_tokens: 3 });
    expect(read(res.body, false).text).toBe(' one two three');
    const asked = (await second.request(1)).json as Record<string, unknown>;
    expect(asked.prompt).toBe('Count: one two');
    expect(asked.max_tokens).toBe(1);
  });

  describe('by token ids, when the stream carried them (return_token_ids) and the engine takes id prompts', () => {
    /** A completion's event as vLLM sends it with return_token_ids: the prompt's ids on the first choice, each token's ids. */
    const ev = (text: string, ids: number[], o: { prompt?: number[]; fin?: string; usage?: [number, number] } = {}) =>
      `data: ${JSON.stringify({
        id: 'cmpl-1',
        object: 'text_completion',
        created: 1,
        model: 'm',
        choices: [{ index: 0, text, logprobs: null, finish_reason: o.fin ?? null, token_ids: ids, ...(o.prompt ? { prompt_token_ids: o.prompt } : {}) }],
        ...(o.usage ? { usage: { prompt_tokens: o.usage[0], completion_tokens: o.usage[1], total_tokens: o.usage[0] + o.usage[1] } } : {}),
      })}\n\n`;
    const usageEvent = (p: number, c: number) =>
      `data: ${JSON.stringify({ id: 'cmpl-2', object: 'text_completion', created: 2, model: 'm', choices: [], usage: { prompt_tokens: p, completion_tokens: c, total_tokens: p + c } })}\n\n`;

    async function run(body: Record<string, unknown>, tokenIdPrompts = true) {
      const first = await upstream();
      const second = await upstream();
      // token 13's text is held back (half a character) when the worker dies
      first.script(piecesThenDrop([Buffer.from(ev('', [], { prompt: [1, 2, 3] }) + ev(' one', [11]) + ev(' two', [12]) + ev('', [13]))]));
      // the continuing worker: its own first event (its prompt's ids), token 13 again and one more
      second.script(
        stream([
          ev('', [], { prompt: [1, 2, 3, 11, 12] }),
          ev(' thr', [13], { usage: [5, 1] }),
          ev('ee', [14], { fin: 'length', usage: [5, 2] }),
          usageEvent(5, 2),
          'data: [DONE]\n\n',
        ]),
      );
      const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
      gw.dp.addVersion('m', 'v1', gw.dp.pool('m', 'v1').cardChecksum, { resume: 'continue_final_message', tokenIdPrompts });
      const res = await httpCall(gw.url, COMPL, {
        model: 'm',
        prompt: 'Count:',
        stream: true,
        max_tokens: 4,
        return_token_ids: true,
        stream_options: { include_usage: true },
        ...body,
      });
      const prompts = sseData(res.body)
        .filter((d) => d !== '[DONE]')
        .flatMap((d) =>
          (JSON.parse(d) as { choices: { prompt_token_ids?: number[] }[] }).choices.map((c) => c.prompt_token_ids).filter((p) => p !== undefined),
        );
      return { got: read(res.body, false), prompts, asked: (await second.request(1)).json as Record<string, unknown> };
    }

    it("continues from the prompt's ids and the sent tokens' (a held-back token generated again); one prompt_token_ids; usage exact", async () => {
      const { got, prompts, asked } = await run({});
      expect(asked.prompt).toEqual([1, 2, 3, 11, 12]);
      expect(asked.max_tokens).toBe(2);
      expect(asked.return_token_ids).toBe(true);
      expect(got.errors).toEqual([]);
      expect(got.text).toBe(' one two three');
      // the client's prompt ids once, its own; the continuation's (its prompt and the text sent) never
      expect(prompts).toEqual([[1, 2, 3]]);
      expect(got.usage).toEqual({ prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
    });

    it('from the text where stop strings make the engine hold text back (its ids run ahead of the text), or the engine takes no id prompts', async () => {
      for (const [body, ids] of [
        [{ stop: ['zzz'] }, true],
        [{}, false],
      ] as const) {
        const { asked, prompts } = await run(body, ids);
        expect(asked.prompt).toBe('Count: one two');
        expect(prompts).toEqual([[1, 2, 3]]);
      }
    });
  });

  it('a continuation the engine refuses (4xx) ends the stream with upstream_resume_refused', async () => {
    const first = await upstream();
    const second = await upstream();
    first.script(piecesThenDrop([Buffer.from(chatEvent(undefined) + chatEvent('Hi'))]));
    second.script(status(400, { error: { message: 'continue_final_message is not supported', code: 400 } }));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })).body, true);
    expect(got.text).toBe('Hi');
    expect((got.errors[0] as { code: string; message: string }).code).toBe('upstream_resume_refused');
    expect((got.errors[0] as { message: string }).message).toContain('continue_final_message is not supported');
  });

  it('n > 1 is not resumed: the error says why', async () => {
    const first = await upstream();
    const second = await upstream();
    first.script(piecesThenDrop([Buffer.from(chatEvent(undefined) + chatEvent('Hi'))]));
    const gw = await gateway(oneModel([first.url, second.url]), {}, rr());
    const got = read((await httpCall(gw.url, CHAT, { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, n: 2 })).body, true);
    expect((got.errors[0] as { message: string }).message).toContain('(not resumed: n > 1)');
    expect(second.requests).toHaveLength(0);
  });
});
