// Reading the admin API from a component: loads on mount and again whenever one of `deps` changes
// (pages pass the live change counter, so a change event re-reads what the page shows).
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError } from './api.js';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
}

export function useApi<T>(path: string | null, deps: unknown[] = []): Loaded<T> {
  const [state, setState] = useState<Loaded<T>>({ data: undefined, error: undefined });
  useEffect(() => {
    if (path === null) return;
    let alive = true;
    api<T>('GET', path).then(
      (data) => alive && setState({ data, error: undefined }),
      (e: unknown) => alive && setState((s) => ({ data: s.data, error: e instanceof ApiError ? e : new ApiError(0, 'network', String(e)) })),
    );
    return () => {
      alive = false;
    };
  }, [path, ...deps]);
  return state;
}
