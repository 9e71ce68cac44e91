// The provider for a version, by its configured kind.
import type { ProviderConfig } from '../config/types.js';
import { ProcessProvider } from './process.js';
import { SimProvider } from './sim.js';
import { StaticProvider } from './static.js';
import type { Provider } from './types.js';

export class Providers {
  private readonly byKind: Record<ProviderConfig['kind'], Provider>;
  constructor(overrides: Partial<Record<ProviderConfig['kind'], Provider>> = {}) {
    this.byKind = {
      sim: overrides.sim ?? new SimProvider(),
      static: overrides.static ?? new StaticProvider(),
      process: overrides.process ?? new ProcessProvider(),
    };
  }
  for(kind: ProviderConfig['kind']): Provider {
    return this.byKind[kind];
  }
}
export type { Provider, WorkerHandle, StartRequest, WorkerExit } from './types.js';
