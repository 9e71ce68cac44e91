// What an operator can do to a model from its page — instant rollback, swap, start a canary, and
// pause / resume / promote / abort the running one — each behind a dialog that states the plan
// first (from the route, the registry and the strategy planner). A viewer sees the same buttons;
// the server refuses their changes (403), and the dialog says so.
import { useState } from 'preact/hooks';
import type { CanaryView, StatusModelView, StrategyPlanView } from '../../src/api/types.js';
import { api, fmt } from './api.js';
import type { ActionSpec } from './confirm.js';
import { ActionButton } from './confirm.js';

const REASON = { reason: 'from the dashboard' };

export function ModelActions({ model, st, canary, role }: { model: string; st: StatusModelView; canary: CanaryView | undefined; role: string }) {
  const m = encodeURIComponent(model);
  const active = st.active ?? '(none)';
  const candidates = st.versions.filter((v) => v.version !== st.active && v.status !== 'retired' && v.status !== 'failed').map((v) => v.version);
  const [pick, setPick] = useState<string>('');
  const target = candidates.includes(pick) ? pick : (candidates[0] ?? '');
  const blocked = st.standbys.map((s) => `${s.version}: ${s.blocked_reason ?? 'eligible'}`).join('; ');

  const rollback: ActionSpec = {
    label: 'Roll back',
    title: `Instant rollback of ${model}`,
    danger: true,
    disabled: st.standby === null ? `no rollback-eligible standby${blocked ? ` (${blocked})` : ''}` : undefined,
    plan: () =>
      Promise.resolve(
        <ul>
          <li>
            All of {model}'s traffic moves from <strong>{active}</strong> to the standby <strong>{st.standby}</strong> in one route swap (well under a
            millisecond).
          </li>
          <li>Requests in flight on {active} finish there; none is dropped.</li>
          <li>{active} stays loaded as the standby, so this can be undone by another rollback.</li>
          {canary && <li>The running canary of {canary.canary} ends.</li>}
        </ul>,
      ),
    run: () => api('POST', `/models/${m}/rollback`, REASON),
  };

  const planOf = (v: string) => api<StrategyPlanView>('GET', `/models/${m}/plan?to=${encodeURIComponent(v)}`);
  const swap: ActionSpec = {
    label: 'Swap',
    title: `Swap ${model} to ${target}`,
    disabled: st.versions.some((v) => v.version === target && (v.status === 'ready' || v.status === 'standby'))
      ? undefined
      : `${target || 'no version'} is not ready`,
    plan: async () => {
      const p = await planOf(target);
      const bg = p.rows.find((r) => r.strategy === 'blue-green');
      return (
        <ul>
          <li>
            <strong>{target}</strong> (loaded, {p.target.gpus} GPU(s)) takes all of {model}'s traffic at once; <strong>{active}</strong> becomes the standby.
          </li>
          <li>
            Downtime {fmt.ms(bg?.downtime_ms)}; rolling back afterwards takes {fmt.ms(bg?.rollback_ms)} ({bg?.rollback_how ?? 'a route swap'}).
          </li>
          <li>
            Risk {p.risk.level}: {p.risk.reason}. The planner recommends {p.recommendation.label}: {p.recommendation.reason}
          </li>
        </ul>
      );
    },
    run: () => api('POST', `/models/${m}/swap`, { to: target }),
  };

  const start: ActionSpec = {
    label: 'Start canary',
    title: `Start a canary of ${target} on ${model}`,
    disabled: canary ? 'a canary is running' : target === '' ? 'no other version' : undefined,
    plan: async () => {
      const p = await planOf(target);
      const stages = p.canary_stages;
      return (
        <>
          <p>
            <strong>{target}</strong> gets a growing share of {model}'s traffic against <strong>{active}</strong>; each stage is judged (latency, errors,
            quality) and a significant regression past its tolerance rolls it back automatically.
          </p>
          {stages && (
            <table>
              <caption>Stages at the live rate ({fmt.num(stages.live_rps, 1)} req/s)</caption>
              <thead>
                <tr>
                  <th scope="col">share</th>
                  <th scope="col">samples needed</th>
                  <th scope="col">expected time</th>
                </tr>
              </thead>
              <tbody>
                {stages.stages.map((s) => (
                  <tr key={s.percent}>
                    <td>{s.percent} %</td>
                    <td>{s.samples_needed}</td>
                    <td>{fmt.duration(s.duration_ms)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <p>
            ETA {fmt.duration(stages?.total_ms)}. Risk {p.risk.level}: {p.risk.reason}.
          </p>
        </>
      );
    },
    run: () => api('POST', `/models/${m}/canary`, { version: target }),
  };

  const verb = (v: 'pause' | 'resume' | 'promote' | 'abort', label: string, plan: string, danger = false): ActionSpec => ({
    label,
    title: `${label} the canary of ${canary?.canary ?? ''}`,
    danger,
    plan: () => Promise.resolve(<p>{plan}</p>),
    run: () => api('POST', `/models/${m}/canary/${v}`, REASON),
  });

  return (
    <div class="actions" role="group" aria-label={`Actions on ${model}`}>
      {role === 'viewer' && <p class="muted">You are logged in as a viewer: the server refuses changes.</p>}
      <ActionButton spec={rollback} testId="action-rollback" />
      <label>
        version{' '}
        <select value={target} onChange={(e) => setPick((e.target as HTMLSelectElement).value)} data-testid="target-version">
          {candidates.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
      </label>
      <ActionButton spec={swap} testId="action-swap" />
      <ActionButton spec={start} testId="action-canary" />
      {canary && (
        <>
          {canary.phase === 'paused' ? (
            <ActionButton
              spec={verb('resume', 'Resume', `The canary continues at ${fmt.num(canary.percent, 0)} % and the judge looks again.`)}
              testId="action-resume"
            />
          ) : (
            <ActionButton
              spec={verb(
                'pause',
                'Pause',
                `The canary holds at ${fmt.num(canary.percent, 0)} % of traffic: no stage advances and no automatic verdict acts until resumed.`,
              )}
              testId="action-pause"
            />
          )}
          <ActionButton
            spec={verb(
              'promote',
              'Promote',
              `${canary.canary} takes 100 % of traffic now, skipping the remaining stages; ${canary.stable} becomes the standby.`,
            )}
            testId="action-promote"
          />
          <ActionButton
            spec={verb(
              'abort',
              'Abort',
              `Traffic goes back to ${canary.stable} at once; ${canary.canary} stops serving (unloaded if the canary loaded it).`,
              true,
            )}
            testId="action-abort"
          />
        </>
      )}
    </div>
  );
}
