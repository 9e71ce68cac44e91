// An in-memory AdaptersPort for controller tests: the registry as a map, the candidate the data plane
// would split an adapter's requests with, and every promotion and unload asked for.
import type { AdapterRef, AdaptersPort } from '../../src/rollout/ports.js';

export class FakeAdapters implements AdaptersPort {
  readonly registered = new Map<string, AdapterRef>();
  readonly candidates = new Map<string, { spec: AdapterRef; share: number; salt: string }>();
  /** Every share set, in order (undefined: the candidate was taken away). */
  readonly shares: { name: string; share: number | undefined }[] = [];
  readonly retired: { model: string; servedAs: string }[] = [];
  /** Makes the next unloads fail on this worker. */
  failUnloadOn: string | undefined;

  add(a: Omit<AdapterRef, 'servedAs'> & { servedAs?: string }): void {
    this.registered.set(a.name, { ...a, servedAs: a.servedAs ?? a.name });
  }

  get(name: string): AdapterRef | undefined {
    return this.registered.get(name);
  }

  setCandidate(name: string, c: { spec: AdapterRef; share: number; salt: string } | undefined): void {
    if (c === undefined) this.candidates.delete(name);
    else this.candidates.set(name, c);
    this.shares.push({ name, share: c?.share });
  }

  promote(name: string, c: AdapterRef): Promise<void> {
    this.registered.set(name, c);
    this.candidates.delete(name);
    return Promise.resolve();
  }

  retire(model: string, servedAs: string): Promise<{ unloaded: number; failed: string[]; pending: string[] }> {
    this.retired.push({ model, servedAs });
    return Promise.resolve(
      this.failUnloadOn === undefined
        ? { unloaded: 2, failed: [], pending: [] }
        : { unloaded: 1, failed: [`${this.failUnloadOn}: 500: engine error`], pending: [] },
    );
  }

  taken(name: string): boolean {
    if (this.registered.has(name)) return true;
    for (const a of this.registered.values()) if (a.servedAs === name) return true;
    for (const c of this.candidates.values()) if (c.spec.servedAs === name) return true;
    return false;
  }
}
