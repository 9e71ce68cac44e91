// The LLM judge's last decisions on a model: which version, its score or the pairwise outcome against the
// other, and — only when the operator enabled `judge.capture_prompts` — the prompt and the answers judged.
import type { JudgeSamplesView, JudgeSampleView } from '../../src/api/types.js';
import { fmt } from './api.js';
import { useApi } from './use-api.js';

/** Rows shown (the server keeps the last 100 over all models). */
const SHOWN = 10;

export function JudgeSamples({ model, changes }: { model: string; changes: number }) {
  const s = useApi<JudgeSamplesView>(`/judge/samples?model=${encodeURIComponent(model)}`, [changes]);
  if (!s.data?.configured) return null;
  const rows = s.data.samples.slice(0, SHOWN);
  return (
    <section aria-labelledby="judge-h">
      <h2 id="judge-h">LLM judge: last decisions</h2>
      {rows.length === 0 ? (
        <p class="muted">Nothing judged on {model} yet.</p>
      ) : (
        <table data-testid="judge-samples">
          <thead>
            <tr>
              <th scope="col">time</th>
              <th scope="col">version</th>
              <th scope="col">decision</th>
              {s.data.capture_prompts && <th scope="col">prompt and answers</th>}
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={`${r.at}-${r.version}`}>
                <td>{fmt.time(r.at)}</td>
                <td>{r.adapter ?? r.version}</td>
                <td>{decision(r)}</td>
                {s.data?.capture_prompts && (
                  <td>
                    <details>
                      <summary>{r.prompt ?? ''}</summary>
                      <p>
                        <strong>{r.version}:</strong> {r.answer ?? ''}
                      </p>
                      {r.against !== null && (
                        <p>
                          <strong>{r.against}:</strong> {r.answer_against ?? ''}
                        </p>
                      )}
                    </details>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {!s.data.capture_prompts && rows.length > 0 && <p class="muted">Prompts and answers are not kept: the judge's capture_prompts is off.</p>}
    </section>
  );
}

function decision(r: JudgeSampleView): string {
  if (r.kind === 'pointwise') return `score ${fmt.num(1 + r.score * 9, 1)} / 10`;
  const against = r.against ?? 'the other';
  return r.score === 1 ? `preferred to ${against}` : r.score === 0 ? `${against} preferred` : `tie with ${against}`;
}
