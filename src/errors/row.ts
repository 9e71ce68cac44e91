// The shape of one row of the error catalogue, shared by its parts.

/** `[HTTP status, when it happens, what to do]`: one row per code. docs/errors.md is generated from it (`npm run docs:errors`). */
export type Row = readonly [status: number, when: string, todo: string];
