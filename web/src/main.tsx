// The dashboard's entry: the session (or the login form), the header, and the pages by the URL's
// hash (#/, #/model/M, #/model/M/version/V, #/audit). The token is typed into the form, sent once
// to /dashboard/login and forgotten: the session lives in an HttpOnly cookie the page cannot read.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { SessionView } from './api.js';
import { ApiError, currentSession, login, logout, onExpired } from './api.js';
import { AuditPage } from './audit.js';
import { live } from './live.js';
import { ModelPage } from './model.js';
import { Overview } from './overview.js';
import { VersionPage } from './version.js';

type Route = { page: 'overview' } | { page: 'model'; model: string } | { page: 'version'; model: string; version: string } | { page: 'audit' };

function parseHash(h: string): Route {
  const parts = h.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'audit') return { page: 'audit' };
  if (parts[0] === 'model' && parts[1] !== undefined) {
    if (parts[2] === 'version' && parts[3] !== undefined) return { page: 'version', model: parts[1], version: parts[3] };
    return { page: 'model', model: parts[1] };
  }
  return { page: 'overview' };
}

function Login({ onIn, notice }: { onIn: (s: SessionView) => void; notice: string | null }) {
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <main class="login">
      <h1>Glidepath</h1>
      <form
        data-testid="login"
        onSubmit={(e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const input = form.elements.namedItem('token') as HTMLInputElement;
          setBusy(true);
          login(input.value).then(
            (s) => {
              input.value = '';
              onIn(s);
            },
            (err: unknown) => {
              setBusy(false);
              setError(err instanceof ApiError ? `${err.message} (${err.code})` : String(err));
            },
          );
        }}
      >
        {notice && (
          <p role="status" class="notice" data-testid="login-notice">
            {notice}
          </p>
        )}
        <label for="token">Admin API token</label>
        <input id="token" name="token" type="password" autocomplete="off" required autofocus aria-describedby="token-help" />
        <p id="token-help" class="muted">
          A token from <code>auth.tokens</code> or <code>&lt;data_dir&gt;/admin-token</code>. It is exchanged for a session cookie and never stored by the page.
        </p>
        <button type="submit" class="primary" disabled={busy}>
          Log in
        </button>
        {error && (
          <p role="alert" class="error" data-testid="login-error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

function App() {
  const [me, setMe] = useState<SessionView | null | undefined>(undefined);
  const [notice, setNotice] = useState<string | null>(null);
  const [route, setRoute] = useState<Route>(parseHash(location.hash));
  const expire = () => {
    live.end();
    setNotice('Your session expired. Log in again.');
    setMe(null);
  };

  useEffect(() => {
    const onHash = () => setRoute(parseHash(location.hash));
    window.addEventListener('hashchange', onHash);
    onExpired(expire);
    currentSession().then(setMe, () => setMe(null));
    return () => window.removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    if (!me) return;
    live.start();
    // once the session may have run out (no request for its idle time), ask; gone: back to the login form
    const t = setTimeout(() => {
      currentSession().then(
        (s) => {
          if (s !== null) setMe(s);
          else expire();
        },
        () => undefined,
      );
    }, me.idle_ms + 500);
    return () => clearTimeout(t);
  }, [me]);

  useEffect(() => {
    document.title = route.page === 'overview' ? 'Glidepath' : route.page === 'audit' ? 'Audit · Glidepath' : `${route.model} · Glidepath`;
    document.getElementById('main')?.focus();
  }, [route]);

  if (me === undefined) return <p class="boot">Loading…</p>;
  if (me === null)
    return (
      <Login
        notice={notice}
        onIn={(s) => {
          setNotice(null);
          setMe(s);
        }}
      />
    );
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header>
        <nav aria-label="Main">
          <a href="#/" class="brand">
            Glidepath
          </a>
          <a href="#/" aria-current={route.page === 'overview' ? 'page' : undefined}>
            Fleet
          </a>
          <a href="#/audit" aria-current={route.page === 'audit' ? 'page' : undefined}>
            Audit
          </a>
        </nav>
        <span class="me" data-testid="me">
          {me.name} ({me.role})
        </span>
        <button
          type="button"
          onClick={() => {
            live.end();
            void logout().then(() => setMe(null));
          }}
        >
          Log out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {route.page === 'overview' && <Overview />}
        {route.page === 'model' && <ModelPage key={route.model} model={route.model} role={me.role} />}
        {route.page === 'version' && <VersionPage model={route.model} version={route.version} />}
        {route.page === 'audit' && <AuditPage />}
      </main>
    </>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
