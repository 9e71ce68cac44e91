// Every action goes through this dialog: it states the plan (what will happen, in words and
// numbers from the server), the operator confirms or cancels, and the server's answer — success or
// its error, a viewer's 403 included — is shown in place. A native <dialog>: focus is trapped,
// Escape cancels, and focus returns to the button that opened it.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export interface ActionSpec {
  /** The button's label, e.g. "Roll back". */
  label: string;
  title: string;
  /** Loads the plan to show (may call the API, e.g. the strategy planner). */
  plan: () => Promise<ComponentChildren>;
  run: () => Promise<unknown>;
  danger?: boolean;
  disabled?: string | undefined;
}

type Phase =
  | { s: 'closed' }
  | { s: 'planning' }
  | { s: 'ready'; plan: ComponentChildren }
  | { s: 'running'; plan: ComponentChildren }
  | { s: 'done'; msg: string }
  | { s: 'failed'; plan: ComponentChildren | null; msg: string };

export function ActionButton({ spec, testId }: { spec: ActionSpec; testId: string }) {
  const dlg = useRef<HTMLDialogElement>(null);
  const [phase, setPhase] = useState<Phase>({ s: 'closed' });

  useEffect(() => {
    const d = dlg.current;
    if (d === null) return;
    if (phase.s !== 'closed' && !d.open) d.showModal();
    if (phase.s === 'closed' && d.open) d.close();
  }, [phase.s]);

  const open = async () => {
    setPhase({ s: 'planning' });
    try {
      setPhase({ s: 'ready', plan: await spec.plan() });
    } catch (e) {
      setPhase({ s: 'failed', plan: null, msg: describe(e) });
    }
  };
  const confirm = async (plan: ComponentChildren) => {
    setPhase({ s: 'running', plan });
    try {
      await spec.run();
      setPhase({ s: 'done', msg: `${spec.title}: done.` });
    } catch (e) {
      setPhase({ s: 'failed', plan, msg: describe(e) });
    }
  };
  const titleId = `${testId}-title`;

  return (
    <>
      <button
        type="button"
        class={spec.danger ? 'danger' : ''}
        data-testid={testId}
        disabled={spec.disabled !== undefined}
        title={spec.disabled}
        onClick={() => void open()}
      >
        {spec.label}
      </button>
      <dialog ref={dlg} aria-labelledby={titleId} onClose={() => setPhase({ s: 'closed' })} data-testid={`${testId}-dialog`}>
        <h2 id={titleId}>{spec.title}</h2>
        <div class="plan" data-testid="plan">
          {phase.s === 'planning' && <p>Working out the plan…</p>}
          {(phase.s === 'ready' || phase.s === 'running' || (phase.s === 'failed' && phase.plan !== null)) && phase.plan}
        </div>
        {phase.s === 'failed' && (
          <p class="error" role="alert" data-testid="action-error">
            {phase.msg}
          </p>
        )}
        {phase.s === 'done' && (
          <p class="ok" role="status" data-testid="action-done">
            {phase.msg}
          </p>
        )}
        <div class="buttons">
          {phase.s === 'ready' && (
            <button type="button" class={spec.danger ? 'danger' : 'primary'} data-testid="confirm" onClick={() => void confirm(phase.plan)}>
              Confirm: {spec.label}
            </button>
          )}
          {phase.s === 'running' && <button disabled>Working…</button>}
          <button type="button" data-testid="close" onClick={() => setPhase({ s: 'closed' })}>
            {phase.s === 'done' || phase.s === 'failed' ? 'Close' : 'Cancel'}
          </button>
        </div>
      </dialog>
    </>
  );
}

function describe(e: unknown): string {
  if (e instanceof ApiError) return `Refused by the server (${e.status} ${e.code}): ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
