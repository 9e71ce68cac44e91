// Migration 002: worker health (src/health/). A version's probe set (what a healthy worker answers);
// each worker's role (serving, or a hot spare out of rotation) and its health state machine (JSON,
// validated by src/health when read back), so both survive a kill -9.
export const version = 2;
export const name = 'health';
export const sql = `
ALTER TABLE versions ADD COLUMN probes TEXT;
ALTER TABLE workers ADD COLUMN role TEXT NOT NULL DEFAULT 'serving' CHECK (role IN ('serving', 'spare'));
ALTER TABLE workers ADD COLUMN health TEXT;
`;
