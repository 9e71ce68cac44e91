// A request record for telemetry and analysis tests: a successful streamed request, fields overridable.
import type { RequestRecord } from '../../src/telemetry/record.js';

export function record(over: Partial<RequestRecord> = {}): RequestRecord {
  return {
    model: 'm',
    version: 'v1',
    worker: 'w',
    status: 200,
    errorCode: undefined,
    stream: true,
    ttftMs: 10,
    tpotMs: 2,
    itlMs: [],
    latencyMs: 100,
    promptTokens: 5,
    completionTokens: 10,
    queueMs: 0,
    at: 1_000_000,
    retries: 0,
    shadow: false,
    ...over,
  };
}
