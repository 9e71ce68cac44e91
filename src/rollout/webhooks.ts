// Webhook notifications: POST one JSON event to every configured webhook, with a per-attempt
// timeout and bounded retries; never throws into the caller; every outcome is recorded.
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { request } from 'undici';
import { DEFAULTS } from '../defaults.js';
import { redactUrl } from '../http/url.js';
import type { AuditInput } from '../store/types.js';

/** What callers hand in; `at` defaults to now. */
export interface NotifyEvent {
  kind: string;
  model?: string | undefined;
  version?: string | undefined;
  message: string;
  data?: unknown;
  at?: number | undefined;
}

/** The JSON body every webhook receives. `at` is an ISO-8601 timestamp. */
export interface WebhookBody {
  kind: string;
  model: string | null;
  version: string | null;
  message: string;
  data: unknown;
  at: string;
}

export interface WebhookResult {
  /** The webhook with credentials and query string removed (safe to log). */
  url: string;
  ok: boolean;
  /** HTTP status of the last attempt, if one answered. */
  status?: number | undefined;
  attempts: number;
  error?: string | undefined;
  durationMs: number;
}

/** Where outcomes go as control events (the control plane's event bus fits). */
export interface EventSink {
  emit(e: { kind: string; model?: string | undefined; version?: string | undefined; message: string; data?: unknown }): unknown;
}

/** Where outcomes go as audit entries (the store fits). */
export interface AuditSink {
  appendAudit(e: AuditInput): Promise<unknown>;
}

export interface NotifyOptions {
  timeoutMs?: number;
  attempts?: number;
  /** Wait before retry n is backoffMs × 2^(n-1). */
  backoffMs?: number;
  /** Outcomes are emitted here as `notification` / `notification_failed` events. */
  events?: EventSink | undefined;
  /** Outcomes are appended to the audit log (actor `notify`, action `notify`). */
  audit?: AuditSink | undefined;
  /** Injectable for tests. */
  sleep?: (ms: number) => Promise<unknown>;
}

export function webhookBody(e: NotifyEvent): WebhookBody {
  return {
    kind: e.kind,
    model: e.model ?? null,
    version: e.version ?? null,
    message: e.message,
    data: e.data ?? null,
    at: new Date(e.at ?? Date.now()).toISOString(),
  };
}

/** 408, 425, 429 and 5xx are worth another attempt; other answers are final. */
function retryable(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

async function postOnce(url: string, body: string, timeoutMs: number): Promise<number> {
  const u = new URL(url);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'glidepath-webhook' };
  // https://user:secret@host/… means basic auth (undici would not send it by itself)
  if (u.username || u.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
    u.username = '';
    u.password = '';
  }
  const res = await request(u, {
    method: 'POST',
    headers,
    body,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  // drain so the socket is reused; the answer's content is not ours to interpret
  await res.body.dump().catch(() => undefined);
  return res.statusCode;
}

async function deliver(url: string, body: string, o: Required<Pick<NotifyOptions, 'timeoutMs' | 'attempts' | 'backoffMs' | 'sleep'>>): Promise<WebhookResult> {
  const t0 = performance.now();
  const safe = redactUrl(url);
  let status: number | undefined;
  let error: string | undefined;
  let attempts = 0;
  for (let i = 0; i < o.attempts; i++) {
    if (i > 0) await o.sleep(o.backoffMs * 2 ** (i - 1));
    attempts++;
    try {
      status = await postOnce(url, body, o.timeoutMs);
      if (status >= 200 && status < 300) return { url: safe, ok: true, status, attempts, durationMs: performance.now() - t0 };
      error = `answered HTTP ${status}`;
      if (!retryable(status)) break;
    } catch (err) {
      status = undefined;
      const e = err as Error & { code?: string };
      error =
        e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT'
          ? `timed out after ${o.timeoutMs} ms`
          : e.message || String(err);
    }
  }
  return { url: safe, ok: false, status, attempts, error, durationMs: performance.now() - t0 };
}

/**
 * POST `{kind, model, version, message, data, at}` to every webhook, in parallel. Resolves with one
 * result per webhook once all are done; never rejects (a broken webhook must not break a rollback).
 */
export async function notify(webhooks: readonly string[], event: NotifyEvent, opts: NotifyOptions = {}): Promise<WebhookResult[]> {
  if (webhooks.length === 0) return [];
  const C = DEFAULTS.control;
  const o = {
    timeoutMs: opts.timeoutMs ?? C.webhookTimeoutMs,
    attempts: Math.max(1, opts.attempts ?? C.webhookAttempts),
    backoffMs: opts.backoffMs ?? C.webhookBackoffMs,
    sleep: opts.sleep ?? ((ms: number) => delay(ms)),
  };
  let body: string;
  try {
    body = JSON.stringify(webhookBody(event));
  } catch (err) {
    // data that cannot be serialised (a cycle, a BigInt): still tell the humans what happened
    body = JSON.stringify(webhookBody({ ...event, data: { unserializable: (err as Error).message } }));
  }
  const results = await Promise.all(
    webhooks.map((u) => deliver(u, body, o).catch((err: unknown) => ({ url: redactUrl(u), ok: false, attempts: 0, error: String(err), durationMs: 0 }))),
  );
  for (const r of results) await record(r, event, opts);
  return results;
}

async function record(r: WebhookResult, event: NotifyEvent, opts: NotifyOptions): Promise<void> {
  try {
    opts.events?.emit({
      kind: r.ok ? 'notification' : 'notification_failed',
      model: event.model,
      version: event.version,
      message: r.ok
        ? `notified ${r.url} of ${event.kind}`
        : `notification of ${event.kind} to ${r.url} failed after ${r.attempts} attempt(s): ${r.error ?? 'unknown error'}`,
      data: { ...r, event: event.kind },
    });
    await opts.audit?.appendAudit({
      at: Date.now(),
      actor: 'notify',
      action: 'notify',
      target: r.url,
      params: { kind: event.kind, model: event.model, version: event.version, attempts: r.attempts, status: r.status },
      result: r.ok ? 'ok' : 'error',
      errorCode: r.ok ? undefined : r.status !== undefined ? 'webhook_refused' : 'webhook_unreachable',
      durationMs: r.durationMs,
    });
  } catch {
    // recording is best effort: a closed store must not turn a notification into a crash
  }
}
