// Disaggregated prefill and decode on the simulator (vLLM's NIXL-connector flow over HTTP): a prefill
// leg holds the prompt's KV blocks and names them; a decode worker of the same layout pulls them and
// generates exactly what a whole request would; one of another layout (another card) refuses them.
import { afterEach, describe, expect, it } from 'vitest';
import { startSim } from '../../../src/sim/index.js';
import type { SimHandle } from '../../../src/sim/index.js';

const sims: SimHandle[] = [];
afterEach(async () => {
  for (const s of sims.splice(0)) await s.close();
});

async function sim(o: Parameters<typeof startSim>[0]): Promise<SimHandle> {
  const s = await startSim({ model: 'm', version: 'v1', seed: 5, interTokenMs: 0, jitter: 0, ...o });
  sims.push(s);
  return s;
}

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = {};
  }
  return { status: r.status, json, text };
}

const ask = { model: 'm', prompt: 'tell me how the blocks travel', max_tokens: 24, temperature: 0, ignore_eos: true };
const textOf = (j: Record<string, unknown>) => (j.choices as { text: string }[])[0]?.text;

describe('disaggregated prefill and decode', () => {
  it('a decode worker of the same layout pulls the blocks once and generates what a whole request would', async () => {
    const whole = await sim({});
    const prefill = await sim({ kvRole: 'prefill', kvLayout: 'card-a' });
    const decode = await sim({ kvRole: 'decode', kvLayout: 'card-a' });
    const reference = await post(whole.url, ask);

    const p = await post(prefill.url, { ...ask, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } });
    expect(p.status).toBe(200);
    const kv = p.json.kv_transfer_params as Record<string, unknown>;
    expect(kv).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_host: '127.0.0.1', remote_port: prefill.port, tp_size: 1 });
    expect(kv.remote_engine_id).toMatch(/^sim-[0-9a-f]{12}$/);
    expect((kv.remote_block_ids as number[]).length).toBeGreaterThan(0);

    const d = await post(decode.url, { ...ask, kv_transfer_params: kv });
    expect(d.status).toBe(200);
    expect(textOf(d.json)).toBe(textOf(reference.json));
    expect(d.json.usage).toEqual(reference.json.usage);

    // the blocks went to the first puller: a second decode of the same transfer finds nothing
    const again = await post(decode.url, { ...ask, kv_transfer_params: kv });
    expect(again.status).toBe(503);
    expect(again.json).toMatchObject({ error: { code: 'kv_transfer_failed' } });
    expect((again.json.error as { message: string }).message).toMatch(/the prefill worker answered 404 \(kv_blocks_not_found\)$/);
  });

  it('a decode worker of another layout (a pair across pools) refuses the blocks', async () => {
    const prefill = await sim({ kvRole: 'prefill', kvLayout: 'card-a' });
    const other = await sim({ kvRole: 'decode', kvLayout: 'card-b' });
    const p = await post(prefill.url, { ...ask, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    const d = await post(other.url, { ...ask, kv_transfer_params: p.json.kv_transfer_params });
    expect(d.status).toBe(500);
    expect(d.json).toMatchObject({ error: { code: 'kv_layout_mismatch' } });
    expect((d.json.error as { message: string }).message).toMatch(/layout "card-a", this decode worker reads "card-b"/);
  });

  it('each leg to its role; malformed parameters are a 400 naming the field; whole requests are served by every role', async () => {
    const prefill = await sim({ kvRole: 'prefill' });
    const decode = await sim({ kvRole: 'decode' });
    expect((await post(decode.url, { ...ask, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } })).json).toMatchObject({
      error: { code: 'kv_role_mismatch' },
    });
    const fake = { do_remote_prefill: true, remote_engine_id: 'sim-x', remote_block_ids: [1], remote_host: '127.0.0.1', remote_port: 9 };
    expect((await post(prefill.url, { ...ask, kv_transfer_params: fake })).json).toMatchObject({ error: { code: 'kv_role_mismatch' } });
    const bad = await post(decode.url, { ...ask, kv_transfer_params: { do_remote_prefill: true, remote_block_ids: 'x' } });
    expect(bad.status).toBe(400);
    expect((bad.json.error as { message: string }).message).toBe('kv_transfer_params.remote_block_ids: expected a list of block ids, got "x"');
    // a simulator pulls only from loopback: a request cannot send it anywhere else
    for (const host of ['10.0.0.1', '127.0.0.1/evil?', 'example.com']) {
      const far = await post(decode.url, { ...ask, kv_transfer_params: { ...fake, remote_host: host } });
      expect(far.status).toBe(400);
      expect((far.json.error as { message: string }).message).toMatch(/^kv_transfer_params\.remote_host: expected a loopback address/);
    }
    const missing = await post(decode.url, { ...ask, kv_transfer_params: { do_remote_prefill: true } });
    expect((missing.json.error as { message: string }).message).toMatch(/do_remote_prefill needs remote_engine_id/);
    expect((await post(prefill.url, { ...ask, stream: true, kv_transfer_params: { do_remote_decode: true } })).json).toMatchObject({
      error: { code: 'invalid_request' },
    });
    // a worker that is gone: the pull fails, 503 with Retry-After's worth of a code
    expect((await post(decode.url, { ...ask, kv_transfer_params: fake })).json).toMatchObject({ error: { code: 'kv_transfer_failed' } });
    for (const s of [prefill, decode]) expect((await post(s.url, ask)).status).toBe(200);
  });
});
