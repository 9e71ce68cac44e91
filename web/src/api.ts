// The page's only way to the server: the admin API on this origin with the session cookie (sent by
// the browser, never readable here), the CSRF token kept in memory for changes, and the two SSE
// streams (change events, chart samples). A 401 anywhere sends the page back to the login form.
import type { SessionView } from '../../src/api/dashboard.js';

export type { SessionView };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let csrf = '';
let expired: () => void = () => undefined;

/** What the page does when the server says the session is gone. */
export function onExpired(fn: () => void): void {
  expired = fn;
}

async function errorOf(res: Response): Promise<ApiError> {
  try {
    const j = (await res.json()) as { error?: { code?: string; message?: string } };
    return new ApiError(res.status, j.error?.code ?? 'unknown', j.error?.message ?? res.statusText);
  } catch {
    return new ApiError(res.status, 'unknown', res.statusText);
  }
}

async function send(method: string, url: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-glidepath-csrf'] = csrf;
  return fetch(url, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
}

/** An admin API call (`path` below /admin/v1); throws ApiError with the server's code and message. */
export async function api<T>(method: 'GET' | 'POST' | 'PUT', path: string, body?: unknown): Promise<T> {
  const res = await send(method, `/admin/v1${path}`, body);
  if (res.status === 401) {
    const e = await errorOf(res);
    expired();
    throw e;
  }
  if (!res.ok) throw await errorOf(res);
  return (await res.json()) as T;
}

/** The current session, or null when there is none (the login form is shown). */
export async function currentSession(): Promise<SessionView | null> {
  const res = await send('GET', '/dashboard/session');
  if (res.status === 401) return null;
  if (!res.ok) throw await errorOf(res);
  const s = (await res.json()) as SessionView | null;
  csrf = s?.csrf ?? '';
  return s;
}

export async function login(token: string): Promise<SessionView> {
  const res = await send('POST', '/dashboard/login', { token });
  if (!res.ok) throw await errorOf(res);
  const s = (await res.json()) as SessionView;
  csrf = s.csrf;
  return s;
}

export async function logout(): Promise<void> {
  await send('POST', '/dashboard/logout', {});
  csrf = '';
}

/**
 * Listen to an SSE stream of the admin API. The browser reconnects by itself; when a reconnect
 * fails, the session is checked, and a gone session sends the page to the login form.
 */
export function stream(path: string, handlers: Record<string, (data: unknown) => void>): () => void {
  const es = new EventSource(`/admin/v1${path}`, { withCredentials: true });
  for (const [kind, fn] of Object.entries(handlers)) es.addEventListener(kind, (e) => fn(JSON.parse((e as MessageEvent<string>).data)));
  es.onerror = () => {
    void currentSession().then(
      (s) => {
        if (s === null) {
          es.close();
          expired();
        }
      },
      () => undefined,
    );
  };
  return () => es.close();
}

export const fmt = {
  ms(x: number | null | undefined): string {
    if (x === null || x === undefined) return '–';
    return x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : `${x.toFixed(x < 10 ? 1 : 0)} ms`;
  },
  pct(x: number | null | undefined, digits = 1): string {
    return x === null || x === undefined ? '–' : `${(x * 100).toFixed(digits)} %`;
  },
  num(x: number | null | undefined, digits = 2): string {
    return x === null || x === undefined ? '–' : x.toFixed(digits);
  },
  p(x: number | null | undefined): string {
    if (x === null || x === undefined) return '–';
    return x < 0.001 ? x.toExponential(1) : x.toFixed(3);
  },
  time(at: number): string {
    return new Date(at).toLocaleTimeString([], { hour12: false });
  },
  duration(ms: number | null | undefined): string {
    if (ms === null || ms === undefined) return '–';
    const s = Math.round(ms / 1000);
    return s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
  },
};
