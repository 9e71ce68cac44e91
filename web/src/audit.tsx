// The audit log with its filters (actor, action, target, result, since), newest first; re-read on
// every change event, so a change made anywhere appears without a reload.
import { useState } from 'preact/hooks';
import type { AuditView } from '../../src/api/types.js';
import { fmt } from './api.js';
import { useLive } from './live.js';
import { useApi } from './use-api.js';

interface Filters {
  actor: string;
  action: string;
  target: string;
  result: '' | 'ok' | 'error';
  since: string;
}

const EMPTY: Filters = { actor: '', action: '', target: '', result: '', since: '' };

export function AuditPage() {
  const live = useLive();
  const [draft, setDraft] = useState<Filters>(EMPTY);
  const [applied, setApplied] = useState<Filters>(EMPTY);
  const q = new URLSearchParams({ limit: '200' });
  for (const [k, v] of Object.entries(applied) as [keyof Filters, string][]) {
    if (v === '') continue;
    q.set(k, k === 'since' ? String(new Date(v).getTime()) : v);
  }
  const audit = useApi<AuditView[]>(`/audit?${q.toString()}`, [live.changes]);
  const field = (k: Exclude<keyof Filters, 'result' | 'since'>, label: string) => (
    <label>
      {label}
      <input value={draft[k]} onInput={(e) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value })} data-testid={`filter-${k}`} />
    </label>
  );
  return (
    <section aria-labelledby="audit-h">
      <h1 id="audit-h">Audit log</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(draft);
        }}
      >
        {field('actor', 'actor')}
        {field('action', 'action')}
        {field('target', 'target')}
        <label>
          result
          <select value={draft.result} onChange={(e) => setDraft({ ...draft, result: (e.target as HTMLSelectElement).value as Filters['result'] })}>
            <option value="">any</option>
            <option value="ok">ok</option>
            <option value="error">error</option>
          </select>
        </label>
        <label>
          since
          <input type="datetime-local" value={draft.since} onInput={(e) => setDraft({ ...draft, since: (e.target as HTMLInputElement).value })} />
        </label>
        <button type="submit">Filter</button>
        <button
          type="button"
          onClick={() => {
            setDraft(EMPTY);
            setApplied(EMPTY);
          }}
        >
          Clear
        </button>
      </form>
      {audit.error && <p class="error">{audit.error.message}</p>}
      <div class="scroll">
        <table data-testid="audit">
          <thead>
            <tr>
              <th scope="col">time</th>
              <th scope="col">actor</th>
              <th scope="col">action</th>
              <th scope="col">target</th>
              <th scope="col">result</th>
              <th scope="col">took</th>
              <th scope="col">parameters</th>
            </tr>
          </thead>
          <tbody>
            {(audit.data ?? []).map((a) => (
              <tr key={a.id} data-action={a.action}>
                <td>
                  <time dateTime={new Date(a.at).toISOString()}>{new Date(a.at).toLocaleString([], { hour12: false })}</time>
                </td>
                <td>{a.actor}</td>
                <td>{a.action}</td>
                <td>{a.target ?? '–'}</td>
                <td>
                  <span class={a.result === 'ok' ? 'verdict pass' : 'verdict fail'}>{a.result}</span>
                  {a.error_code && ` ${a.error_code}`}
                </td>
                <td>{fmt.ms(a.duration_ms)}</td>
                <td>
                  <code>{a.params === null || a.params === undefined ? '' : JSON.stringify(a.params)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
