// The store's public surface: the Store seam, the SQLite implementation, and the version Registry.
export * from './types.js';
export { SqliteStore, openStore, openMemoryStore } from './sqlite.js';
export type { SqliteOptions } from './sqlite.js';
export { Registry } from './registry.js';
export type { ChangeOptions, PromoteOptions, RollbackOptions, SeedReport, SwitchResult } from './registry.js';
export { LATEST_SCHEMA_VERSION, MIGRATIONS } from './migrations/index.js';
export type { Migration } from './migrations/index.js';
export { openConfiguredStore } from './open.js';
export type { OpenedStore } from './open.js';
export { KvStore, openKvStore } from './kv/store.js';
export { EtcdKv } from './kv/etcd.js';
