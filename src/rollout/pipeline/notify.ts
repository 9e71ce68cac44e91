// The `rollback.notify` of a pipeline: POST a JSON notification to a URL (the `notify:` value
// itself when it is one, else `--notify-url`), or, with neither, say so in the output.
import { PIPELINE_DEFAULTS } from './defaults.js';

export interface RollbackNotice {
  event: 'pipeline.rolled_back';
  channel: string;
  pipeline: string | undefined;
  file: string;
  model: string | undefined;
  stage: string;
  trigger: string;
  summary: string;
  checks: unknown[];
  versions: Record<string, string>;
  action: { command: string; result: string } | null;
  at: string;
}

export interface NotifyResult {
  sent: boolean;
  /** What happened, for the run's output. */
  detail: string;
}

/** Where a notification goes: a channel name (e.g. pagerduty) and, when known, a URL. */
export function notifyTarget(notify: string, notifyUrl: string | undefined): { channel: string; url: string | undefined } {
  if (/^https?:\/\//i.test(notify)) return { channel: notify, url: notify };
  return { channel: notify, url: notifyUrl };
}

export async function sendNotice(url: string | undefined, notice: RollbackNotice, timeoutMs: number = PIPELINE_DEFAULTS.notifyTimeoutMs): Promise<NotifyResult> {
  if (url === undefined) {
    return { sent: false, detail: `notify ${notice.channel}: not sent (give --notify-url, or a URL as rollback.notify); the notice is in the run's result` };
  }
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(notice),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer();
    if (!res.ok) return { sent: false, detail: `notify ${notice.channel}: ${url} answered HTTP ${res.status}` };
    return { sent: true, detail: `notify ${notice.channel}: sent to ${url}` };
  } catch (err) {
    const why = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (err as Error).message;
    return { sent: false, detail: `notify ${notice.channel}: POST ${url} failed (${why})` };
  }
}
