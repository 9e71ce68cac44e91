// Migration 001: the initial schema. Never edit a released migration: add 002_… instead.
// Times are epoch milliseconds (INTEGER); JSON columns hold JSON text.
export const version = 1;
export const name = 'init';
export const sql = `
-- Versions: identity (model, id). 'spec' is the VersionConfig it was registered with (JSON);
-- the other columns are its lifecycle. Versions are never deleted, only retired.
CREATE TABLE versions (
  model             TEXT    NOT NULL,
  id                TEXT    NOT NULL,
  status            TEXT    NOT NULL,
  card_checksum     TEXT    NOT NULL,
  weight_hash       TEXT,
  base_model        TEXT    NOT NULL,
  quantization      TEXT    NOT NULL,
  tp                INTEGER NOT NULL,
  spec              TEXT    NOT NULL,
  warmup_tokens     INTEGER NOT NULL,
  registered_at     INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  loaded_at         INTEGER,
  load_time_ms      REAL,
  activated_at      INTEGER,
  deactivated_at    INTEGER,
  gpus              TEXT    NOT NULL DEFAULT '[]',
  health            TEXT    NOT NULL DEFAULT '{"state":"unknown"}',
  rollback_eligible INTEGER NOT NULL DEFAULT 0,
  rollback_blocked  TEXT,
  failure           TEXT,
  PRIMARY KEY (model, id)
);
CREATE INDEX versions_by_status ON versions (model, status);
-- The invariant "at most one active version per model", enforced by the database itself.
CREATE UNIQUE INDEX versions_one_active ON versions (model) WHERE status = 'active';

CREATE TABLE version_transitions (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  model       TEXT    NOT NULL,
  version_id  TEXT    NOT NULL,
  from_status TEXT    NOT NULL,
  to_status   TEXT    NOT NULL,
  at          INTEGER NOT NULL,
  actor       TEXT,
  reason      TEXT,
  FOREIGN KEY (model, version_id) REFERENCES versions (model, id) ON DELETE CASCADE
);
CREATE INDEX version_transitions_by_version ON version_transitions (model, version_id, seq);

-- Who was active when: one row per period; 'until' is NULL while it lasts.
CREATE TABLE active_history (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  model      TEXT    NOT NULL,
  version_id TEXT    NOT NULL,
  since      INTEGER NOT NULL,
  until      INTEGER,
  actor      TEXT,
  reason     TEXT,
  FOREIGN KEY (model, version_id) REFERENCES versions (model, id) ON DELETE CASCADE
);
CREATE INDEX active_history_by_model ON active_history (model, seq);

-- Routes: the gateway's snapshot per model, opaque JSON, with a compare-and-set revision.
CREATE TABLE routes (
  model      TEXT    PRIMARY KEY,
  revision   INTEGER NOT NULL,
  route      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL
);

-- Rollouts: a persisted state machine per rollout; at most one non-terminal rollout per model.
CREATE TABLE rollouts (
  id         TEXT    PRIMARY KEY,
  model      TEXT    NOT NULL,
  phase      TEXT    NOT NULL,
  terminal   INTEGER NOT NULL DEFAULT 0,
  revision   INTEGER NOT NULL,
  state      TEXT    NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX rollouts_one_active ON rollouts (model) WHERE terminal = 0;
CREATE INDEX rollouts_by_model ON rollouts (model, created_at);

CREATE TABLE rollout_events (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  rollout_id TEXT    NOT NULL REFERENCES rollouts (id) ON DELETE CASCADE,
  at         INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  message    TEXT,
  data       TEXT
);
CREATE INDEX rollout_events_by_rollout ON rollout_events (rollout_id, seq);

-- GPU id → the version (and worker) holding it.
CREATE TABLE gpu_assignments (
  gpu_id      TEXT    PRIMARY KEY,
  model       TEXT    NOT NULL,
  version_id  TEXT    NOT NULL,
  worker_id   TEXT,
  assigned_at INTEGER NOT NULL,
  FOREIGN KEY (model, version_id) REFERENCES versions (model, id)
);

-- Workers started or adopted, so a restarted control plane knows what to bring back.
CREATE TABLE workers (
  id         TEXT    PRIMARY KEY,
  model      TEXT    NOT NULL,
  version_id TEXT    NOT NULL,
  endpoint   TEXT    NOT NULL,
  provider   TEXT    NOT NULL,
  pid        INTEGER,
  state      TEXT    NOT NULL,
  gpus       TEXT    NOT NULL DEFAULT '[]',
  started_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  info       TEXT,
  FOREIGN KEY (model, version_id) REFERENCES versions (model, id)
);
CREATE INDEX workers_by_version ON workers (model, version_id);

-- Audit log of every change.
CREATE TABLE audit (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  actor       TEXT    NOT NULL,
  action      TEXT    NOT NULL,
  target      TEXT,
  params      TEXT,
  result      TEXT    NOT NULL CHECK (result IN ('ok', 'error')),
  error_code  TEXT,
  duration_ms REAL
);
CREATE INDEX audit_by_at ON audit (at);
CREATE INDEX audit_by_actor ON audit (actor, at);
CREATE INDEX audit_by_action ON audit (action, at);
CREATE INDEX audit_by_target ON audit (target, at);

-- API tokens, hashed.
CREATE TABLE tokens (
  name       TEXT    PRIMARY KEY,
  role       TEXT    NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
  sha256     TEXT    NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  source     TEXT    NOT NULL
);

-- Small settings, JSON values.
CREATE TABLE settings (
  key        TEXT    PRIMARY KEY,
  value      TEXT    NOT NULL,
  updated_at INTEGER NOT NULL
);
`;
