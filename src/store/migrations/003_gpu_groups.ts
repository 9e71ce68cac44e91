// Migration 003: a GPU may be held by a time-shared group (`@<group>`, docs/multi-model.md) as well
// as by a version: the holder's link to a version is checked by the store's code (fleet.ts) instead
// of a foreign key. SQLite cannot drop a constraint, so the table is copied.
export const version = 3;
export const name = 'gpu_groups';
export const sql = `
CREATE TABLE gpu_assignments_v3 (
  gpu_id      TEXT    PRIMARY KEY,
  model       TEXT    NOT NULL,
  version_id  TEXT    NOT NULL,
  worker_id   TEXT,
  assigned_at INTEGER NOT NULL
);
INSERT INTO gpu_assignments_v3 (gpu_id, model, version_id, worker_id, assigned_at)
  SELECT gpu_id, model, version_id, worker_id, assigned_at FROM gpu_assignments;
DROP TABLE gpu_assignments;
ALTER TABLE gpu_assignments_v3 RENAME TO gpu_assignments;
`;
