// One version: its card (weights, engine shape, checksum), status and health, its live window,
// its probe set and its lifecycle transitions.
import type { VersionDetail } from '../../src/api/types.js';
import { fmt } from './api.js';
import { useLive } from './live.js';
import { useApi } from './use-api.js';

export function VersionPage({ model, version }: { model: string; version: string }) {
  const live = useLive();
  const d = useApi<VersionDetail>(`/models/${encodeURIComponent(model)}/versions/${encodeURIComponent(version)}`, [live.changes]);
  if (d.error && !d.data) return <p class="error">{d.error.message}</p>;
  const v = d.data;
  if (!v) return <p aria-busy="true">Loading…</p>;
  const a = v.architecture;
  return (
    <>
      <h1>
        <a href={`#/model/${encodeURIComponent(model)}`}>{model}</a> / {v.version} <span class={`status ${v.status}`}>{v.status}</span>
      </h1>
      <div class="cards">
        <section class="card" aria-labelledby="card-h">
          <h2 id="card-h">Card</h2>
          <dl class="facts">
            <dt>weights</dt>
            <dd>{v.weights}</dd>
            <dt>weight hash</dt>
            <dd>{v.weight_hash ?? '–'}</dd>
            <dt>base model</dt>
            <dd>{v.base_model}</dd>
            <dt>card checksum</dt>
            <dd>
              <code>{v.card_checksum}</code>
            </dd>
            <dt>quantization</dt>
            <dd>{v.quantization}</dd>
            <dt>TP × replicas</dt>
            <dd>
              {v.tp} × {v.replicas} ({v.gpu_memory_gb} GB each)
            </dd>
            <dt>architecture</dt>
            <dd>
              {a.layers} layers, {a.kv_heads} KV heads × {a.head_dim}, block {a.block_size}, context {a.max_context}, tokenizer {a.tokenizer}
            </dd>
            <dt>provider</dt>
            <dd>{v.provider}</dd>
            <dt>GPUs</dt>
            <dd>{v.gpus.join(', ') || '–'}</dd>
            {v.kv_cache_compatibility && (
              <>
                <dt>KV cache vs {v.kv_cache_compatibility.with}</dt>
                <dd>{v.kv_cache_compatibility.compatible ? 'compatible' : `incompatible: ${v.kv_cache_compatibility.mismatches.join(', ')}`}</dd>
              </>
            )}
          </dl>
        </section>
        <section class="card" aria-labelledby="health-h">
          <h2 id="health-h">Health and traffic</h2>
          <dl class="facts">
            <dt>health</dt>
            <dd>
              <span class={`health ${v.health.state}`}>{v.health.state}</span> {v.health.detail ?? ''}
            </dd>
            <dt>workers healthy</dt>
            <dd>
              {v.health.healthy_workers ?? '–'} of {v.health.total_workers ?? '–'}
            </dd>
            <dt>rollback</dt>
            <dd>{v.rollback_eligible ? 'eligible' : (v.rollback_blocked_reason ?? 'not eligible')}</dd>
            <dt>weight</dt>
            <dd>{fmt.pct(v.weight, 0)}</dd>
            <dt>window</dt>
            <dd>
              {v.window.requests} requests, {fmt.num(v.window.rps, 1)} req/s, errors {fmt.pct(v.window.error_rate)}, TTFT p50/p99 {fmt.ms(v.window.ttft_ms.p50)}{' '}
              / {fmt.ms(v.window.ttft_ms.p99)}, TPOT p50/p99 {fmt.ms(v.window.tpot_ms.p50)} / {fmt.ms(v.window.tpot_ms.p99)}
            </dd>
            {v.failure && (
              <>
                <dt>failure</dt>
                <dd class="error">
                  {v.failure.code}: {v.failure.message}
                </dd>
              </>
            )}
          </dl>
        </section>
      </div>
      <section aria-labelledby="probes-h">
        <h2 id="probes-h">Probe set</h2>
        {v.probes ? (
          <>
            <p class="muted">
              {v.probes.basis}, recorded {new Date(v.probes.recorded_at).toLocaleString([], { hour12: false })}
              {v.probes.pinned && ', pinned'}
            </p>
            <ul>
              {v.probes.probes.map((p) => (
                <li key={p.prompt}>
                  <q>{p.prompt}</q> → {p.tokens.join('')}
                </li>
              ))}
            </ul>
          </>
        ) : (
          <p class="muted">Not recorded yet.</p>
        )}
      </section>
      <section aria-labelledby="tr-h">
        <h2 id="tr-h">Transitions</h2>
        <ol class="events">
          {v.transitions.map((t) => (
            <li key={`${t.at}-${t.to}`}>
              <time>{fmt.time(t.at)}</time> {t.from} → {t.to} {t.actor && `by ${t.actor}`} {t.reason && <span class="muted">({t.reason})</span>}
            </li>
          ))}
        </ol>
      </section>
    </>
  );
}
