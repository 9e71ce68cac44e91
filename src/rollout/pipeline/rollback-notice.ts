// The `rollback.notify` of a pipeline: one `pipeline_rolled_back` event POSTed through the control
// plane's webhook notifier (timeouts, retries) to every webhook the run knows: the `notify:` value
// when it is a URL, `--notify-url`, and the webhooks of `--config`; with none, the run says so.
import { notify } from '../webhooks.js';
import { redactUrl } from '../../http/url.js';
import type { WebhookResult } from '../webhooks.js';
import type { Check } from './trigger.js';

/** The event's `data`: everything about the rollback a responder needs. */
export interface RollbackNotice {
  channel: string;
  pipeline: string | undefined;
  file: string;
  stage: string;
  trigger: string;
  summary: string;
  checks: Check[];
  versions: Record<string, string>;
  action: { command: string; result: string } | null;
}

export interface NotifyResult {
  sent: boolean;
  /** What happened, for the run's output. */
  detail: string;
  results: WebhookResult[];
}

/** The webhooks for one notification: the `notify:` value itself when it is a URL, then the run's own. */
export function notifyTargets(notifyValue: string, urls: readonly string[]): string[] {
  const own = /^https?:\/\//i.test(notifyValue) ? [notifyValue] : [];
  return [...new Set([...own, ...urls])];
}

export async function sendNotice(
  urls: readonly string[],
  model: string | undefined,
  notice: RollbackNotice,
  opts: { timeoutMs?: number; attempts?: number } = {},
): Promise<NotifyResult> {
  if (urls.length === 0) {
    return {
      sent: false,
      detail: `notify ${notice.channel}: not sent (no webhook: give --notify-url or --config, or a URL as rollback.notify); the notice is in the run's result`,
      results: [],
    };
  }
  const version = notice.versions.canary ?? notice.versions.active;
  const results = await notify(
    urls,
    {
      kind: 'pipeline_rolled_back',
      model,
      version,
      message: `pipeline ${notice.pipeline ?? notice.file} rolled back in stage ${notice.stage}: ${notice.summary}`,
      data: notice,
    },
    opts,
  );
  const ok = results.filter((r) => r.ok);
  const failed = results.filter((r) => !r.ok).map((r) => `${redactUrl(r.url)}: ${r.error ?? 'failed'}`);
  const detail = `notify ${notice.channel}: sent to ${ok.length}/${results.length} webhook(s)${ok.length ? ` (${ok.map((r) => r.url).join(', ')})` : ''}${failed.length ? `; failed: ${failed.join('; ')}` : ''}`;
  return { sent: ok.length > 0, detail, results };
}
