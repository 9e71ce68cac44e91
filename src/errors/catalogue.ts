// The error catalogue: every code Glidepath answers with, records or audits, with its HTTP status, when it
// happens and what to do; the OpenAI-style `type` follows from the status. `ErrorCode` is the table's
// literal union. The classes that carry the codes, and why each other Error subclass of src/ lives
// where it does, are in src/errors.ts (which re-exports all of this); the rows live in three parts beside
// this file (codes-data-plane.ts, codes-control.ts, codes-tools.ts), joined here in that order; docs/errors.md is rendered from
// this table (`npm run docs:errors`) and test/unit/repo/errors.test.ts ties the two, and src/, to it.
//
// No message template column: a message names the value that is wrong (the house rule), so almost
// every message is built where the error is thrown; the few fixed ones live in their one class
// (UnauthorizedError, PayloadTooLargeError…) or their one throw site.

import { CONTROL_CODES } from './codes-control.js';
import { DATA_PLANE_CODES } from './codes-data-plane.js';
import { TOOL_CODES } from './codes-tools.js';
import type { Row } from './row.js';

/** OpenAI-compatible error `type` values. */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'server_error'
  | 'upstream_error'
  | 'timeout_error'
  | 'unavailable_error';

// ---- the catalogue --------------------------------------------------------------------------------

/**
 * Every error code Glidepath answers with, records, or audits. A code has one status: a code that
 * meant two things was split (the simulator's "still loading" is `model_loading` everywhere; a
 * route's expected revision that is out of date is `route_revision_conflict`, 409, on the API as in
 * the data plane). The status of `injected_fault` is the one the fault set names (500 by default).
 */
export const CATALOGUE = { ...DATA_PLANE_CODES, ...CONTROL_CODES, ...TOOL_CODES } as const satisfies Record<string, Row>;

/** The parts, for the test that no code is defined in two of them (a spread would keep the last silently). */
export const CATALOGUE_PARTS: readonly Record<string, Row>[] = [DATA_PLANE_CODES, CONTROL_CODES, TOOL_CODES];

export type ErrorCode = keyof typeof CATALOGUE;

/** The codes whose status is `S` (each error class takes only its own). */
export type CodeWithStatus<S extends number> = { [K in ErrorCode]: (typeof CATALOGUE)[K][0] extends S ? K : never }[ErrorCode];

/** The OpenAI-compatible `type` of an error, from its status. */
export function errorTypeOf(status: number): ErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 502) return 'upstream_error';
  if (status === 503) return 'unavailable_error';
  if (status === 504) return 'timeout_error';
  // 501 and 505 refuse what the client sent (a transfer coding, an HTTP version), like a 4xx
  if (status >= 500 && status !== 501 && status !== 505) return 'server_error';
  return 'invalid_request_error';
}
