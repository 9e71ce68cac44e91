// The continuation's request and events where token ids are involved: which prompt it is asked
// (the ids, or the text), what is refused, and the continuing worker's prompt ids kept from the client.
import { describe, expect, it } from 'vitest';
import { Continuation, planResume } from '../../../src/gateway/resume.js';
import { SentLog, emptySoFar, readEvent } from '../../../src/gateway/resume-state.js';
import type { SoFar } from '../../../src/gateway/resume-state.js';
import { streamRequest } from '../../helpers/resume-client.js';

const req = streamRequest;
const IDS = { resume: 'continue_final_message', tokenIdPrompts: true } as const;

/** What a client was sent of a completion: `[text, ids]` per event (ids undefined: the event had none). */
function sent(events: [string, number[] | undefined][], prompt?: number[]): SoFar {
  const s = emptySoFar();
  if (prompt) readEvent(s, JSON.stringify({ id: 'c', choices: [{ index: 0, text: '', prompt_token_ids: prompt, token_ids: [] }] }), false);
  for (const [text, ids] of events) readEvent(s, JSON.stringify({ id: 'c', choices: [{ index: 0, text, ...(ids ? { token_ids: ids } : {}) }] }), false);
  return s;
}

const promptOf = (d: ReturnType<typeof planResume>) => ('plan' in d ? (JSON.parse(d.plan.body.toString()) as { prompt: unknown }).prompt : d);

describe('planResume and token ids', () => {
  it("a prompt of ids goes on from its ids and the sent tokens' even when the stream did not repeat them", () => {
    const d = planResume(
      req({ prompt: [5, 6] }),
      false,
      sent([
        [' a', [7]],
        [' b', [8]],
      ]),
      IDS,
    );
    expect(promptOf(d)).toEqual([5, 6, 7, 8]);
    expect('plan' in d && d.plan.sent).toBe(2);
  });

  it('an event with text but no ids: the text, re-tokenised, is all there is', () => {
    expect(
      promptOf(
        planResume(
          req({ prompt: 'P' }),
          false,
          sent(
            [
              [' a', [7]],
              [' b', undefined],
            ],
            [1],
          ),
          IDS,
        ),
      ),
    ).toBe('P a b');
  });

  it('a prompt of ids that cannot be continued says why', () => {
    expect(promptOf(planResume(req({ prompt: [5, 6] }), false, sent([[' a', undefined]]), IDS))).toEqual({
      refused: 'a prompt of token ids whose stream did not carry the generated ids (ask return_token_ids)',
    });
    expect(promptOf(planResume(req({ prompt: [5, 6] }), false, sent([[' a', [7]]]), { ...IDS, tokenIdPrompts: false }))).toEqual({
      refused: "a prompt of token ids, which the version's engine does not take back (provider.token_id_prompts: false)",
    });
  });

  it("reads the prompt's ids, each token's, and how many of them had their text sent", () => {
    const s = sent(
      [
        [' a', [7]],
        ['', [8]],
      ],
      [1],
    );
    expect([s.promptIds, s.tokenIds, s.idsAtText, s.idsMissing]).toEqual([[1], [7, 8], 1, false]);
  });
});

describe("the continuing worker's prompt ids never reach the client", () => {
  it('chat: dropped from its events (vLLM puts them on the first)', () => {
    const so = { ...emptySoFar(), id: 'orig', text: 'Hi', role: true };
    const c = new Continuation(so, true, 1, { stream: true });
    const out = c.feed(
      Buffer.from(
        `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { role: 'assistant', content: '' } }], prompt_token_ids: [1, 2, 9] })}\n\n` +
          `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { content: ' there' }, token_ids: [10] }] })}\n\n`,
      ),
    );
    expect(out).toBe(`data: ${JSON.stringify({ id: 'orig', choices: [{ index: 0, delta: { content: ' there' }, token_ids: [10] }] })}\n\n`);
  });
});

describe('token ids across breaks (an adversarial review found each)', () => {
  const ev = (o: unknown) => Buffer.from(`data: ${JSON.stringify(o)}\n\n`);
  const head = { id: 'cmpl-1', object: 'text_completion', created: 1, model: 'm' };
  const body = { model: 'm', prompt: 'Hi', max_tokens: 50, stream: true, return_token_ids: true };
  const planOf = (so: SoFar, b: Record<string, unknown> = body) => planResume(req(b), false, so, IDS) as { plan: { body: Buffer; sent: number } };

  it('a token held back at the first break is generated again and its id reaches the client once: a second break prompts with each id once', () => {
    const log = new SentLog(false, 1 << 20);
    log.append(ev({ ...head, choices: [{ index: 0, text: ' Hello', prompt_token_ids: [1, 2, 3], token_ids: [10] }] }));
    // the first byte of "é": its id, no text yet
    log.append(ev({ ...head, choices: [{ index: 0, text: '', token_ids: [20] }] }));
    const so1 = log.read();
    const d1 = planOf(so1);
    expect([JSON.parse(d1.plan.body.toString()).prompt, d1.plan.sent]).toEqual([[1, 2, 3, 10], 1]);
    const c = new Continuation(so1, false, d1.plan.sent, body);
    const out = c.feed(
      Buffer.concat([
        ev({ id: 'x', choices: [{ index: 0, text: '', prompt_token_ids: [1, 2, 3, 10], token_ids: [20] }] }),
        ev({ id: 'x', choices: [{ index: 0, text: 'é', token_ids: [21] }] }),
      ]),
    );
    log.append(Buffer.from(out));
    const so2 = log.read();
    expect([so2.tokenIds, so2.text]).toEqual([[10, 20, 21], ' Helloé']);
    const d2 = planOf(so2);
    expect([JSON.parse(d2.plan.body.toString()).prompt, d2.plan.sent]).toEqual([[1, 2, 3, 10, 20, 21], 3]);
  });

  it('several prompts are refused, never cut to the first', () => {
    const log = new SentLog(false, 1 << 20);
    log.append(ev({ ...head, choices: [{ index: 0, text: ' x', prompt_token_ids: [1], token_ids: [10] }] }));
    expect(planResume(req({ ...body, prompt: ['a', 'b'] }), false, log.read(), IDS)).toEqual({ refused: 'a prompt of several prompts' });
  });

  it('a stream broken before its first event is asked again as it was: the client gets its prompt ids from the retry', () => {
    const so = new SentLog(false, 1 << 20).read();
    const c = new Continuation(so, false, planOf(so).plan.sent, body);
    expect(c.feed(ev({ id: 'x', choices: [{ index: 0, text: ' Hello', prompt_token_ids: [1, 2, 3], token_ids: [10] }] }))).toContain(
      '"prompt_token_ids":[1,2,3]',
    );
  });
});
