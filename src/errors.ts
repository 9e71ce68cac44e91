// Every error Glidepath raises: the classes that carry the codes of the catalogue (src/errors/catalogue.ts,
// re-exported here), and which other Error subclasses of src/ live elsewhere and why.
//
// The catalogue is the one table, as fastify and undici keep theirs: code → HTTP status (the
// OpenAI-style `type` follows from it), when it happens, what to do. `ErrorCode` is its literal
// union, and every constructor takes one, so an unknown code does not compile and a code cannot be
// 404 in one place and 400 in another: the status comes from the table, never from the caller.
// Codes written as plain strings (the gateway's refusals at accept, request records, audit entries,
// the CLI's own) are checked by a test that scans src/, and docs/errors.md is generated from the
// table (a test keeps it in step). The table is its own file so that this one stays short.
//
// Which error classes live here, and which elsewhere (decided per class):
// - here: GlidepathError(code, message) and one thin class per status (BadRequestError(code, message)
//   …). The thin classes stay (rather than `new GlidepathError(code, …)` everywhere) because each takes
//   only the codes of its own status (CodeWithStatus<S>), so a throw site says what kind of refusal it
//   is and the compiler checks that too; the ones with a fixed code (UnauthorizedError,
//   PayloadTooLargeError…) also fix the message. ConfigError carries the issues. ApiError is not a
//   GlidepathError: an error answered by a Glidepath API, whose code the CLI keeps as received (a
//   newer server may send one this build does not know), so it is a plain string there; the CLI's
//   own codes (`api_unreachable`…) go through ApiError.local, typed and with the table's `type`.
// - elsewhere, on purpose: signals between the parts of one module that never reach a client as
//   themselves and are turned into a catalogue code where they leave it — the HTTP parser's
//   ParseError (its code is an ErrorCode; status from the table), the worker-response ProtocolError,
//   the gateway's AbortReason / ConnectError / LocalResourceError / WorkerQueueError / HoldRejected
//   (src/gateway/upstream-failure.ts maps them), the domain's RouteValidationError and
//   VersionRuleError (src/domain imports nothing of ours; their codes are catalogue codes spelt as
//   literal types there), the pipeline's WordError / TriggerError (parse positions, reported as
//   issues of an `invalid_config`), the LLM judge's JudgeError (counted as a judge failure, never
//   answered), and the CLI's UsageError / NotConfirmedError (exit codes, not API errors).
// Removed: the simulator's InjectedError (now `injected_fault` with the fault's status), the
// never-thrown `bad_usage`, the unused TooManyRequestsError and InternalError (the 429s are refusals
// built by src/gateway/limits.ts; toGlidepathError builds the one internal_error), and the made-up
// `http_<status>` codes (a webhook's error answer is `webhook_refused`; an API error without an
// error body is `invalid_response` in the CLI).
import { CATALOGUE, errorTypeOf } from './errors/catalogue.js';
import type { CodeWithStatus, ErrorCode, ErrorType } from './errors/catalogue.js';

export { CATALOGUE, errorTypeOf } from './errors/catalogue.js';
export type { CodeWithStatus, ErrorCode, ErrorType } from './errors/catalogue.js';

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: ErrorCode; param?: string | null };
}

type Opts = {
  details?: Record<string, unknown>;
  retryAfterS?: number;
  cause?: unknown;
};

/**
 * A code with its message and options. Only `injected_fault` may name a status (the one its fault set
 * names); every other code answers with the table's, and the compiler refuses a `status` for it.
 */
type ErrorArgs =
  [code: 'injected_fault', message: string, opts?: Opts & { status?: number }] | [code: Exclude<ErrorCode, 'injected_fault'>, message: string, opts?: Opts];

/** Base class: every Glidepath error has a stable `code` that callers branch on, never the message. */
export class GlidepathError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  /** Extra fields for admin API responses (never secrets). */
  readonly details: Record<string, unknown> | undefined;
  /** Seconds a client should wait before retrying (sets `Retry-After`). */
  readonly retryAfterS: number | undefined;

  constructor(...[code, message, opts = {}]: ErrorArgs) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = (code === 'injected_fault' && 'status' in opts ? opts.status : undefined) ?? CATALOGUE[code][0];
    this.type = errorTypeOf(this.status);
    this.details = opts.details;
    this.retryAfterS = opts.retryAfterS;
  }

  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.code } };
  }

  toJSON(): ErrorBody {
    return this.toBody();
  }
}

// ---- one class per status, each taking only its own codes ----------------------------------------

export class BadRequestError extends GlidepathError {
  constructor(code: CodeWithStatus<400>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
export class UnauthorizedError extends GlidepathError {
  constructor(message = 'missing or invalid bearer token', opts?: Opts) {
    super('unauthorized', message, opts);
  }
}
export class ForbiddenError extends GlidepathError {
  constructor(message: string, opts?: Opts) {
    super('forbidden', message, opts);
  }
}
export class NotFoundError extends GlidepathError {
  constructor(code: CodeWithStatus<404>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
/** `allow`: the methods the path takes, for the 405's `Allow` header (RFC 9110 §15.5.6: an origin server must send it). */
export class MethodNotAllowedError extends GlidepathError {
  constructor(
    message: string,
    readonly allow: readonly string[] = [],
  ) {
    super('method_not_allowed', message);
  }
}
export class ConflictError extends GlidepathError {
  constructor(code: CodeWithStatus<409>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
export class PayloadTooLargeError extends GlidepathError {
  constructor(limit: number) {
    super('body_too_large', `request body exceeds the limit of ${limit} bytes`);
  }
}
export class UnsupportedMediaTypeError extends GlidepathError {
  constructor(got: string | undefined) {
    super('unsupported_content_type', `content-type must be application/json, got ${got ? JSON.stringify(got) : 'none'}`);
  }
}
export class UnprocessableError extends GlidepathError {
  constructor(code: CodeWithStatus<422>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
/**
 * `make()`'s error without a stack trace. For a worker's failures as the gateway meets them: when a
 * worker dies, every one of its streams fails at once on the path that continues them elsewhere, and
 * each stack (~10–40 µs to capture here, two a break) would say only that a socket ended. The message
 * names the worker. Errors that may be bugs keep their stacks.
 */
export function withoutStack<E extends Error>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** A worker failed the request (refused, dropped, broke a stream, sent garbage): no stack (see withoutStack). */
export class UpstreamError extends GlidepathError {
  constructor(code: CodeWithStatus<502>, message: string, opts?: Opts) {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(code, message, opts);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }
}
export class TooManyRequestsError extends GlidepathError {
  constructor(code: CodeWithStatus<429>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
export class UnavailableError extends GlidepathError {
  constructor(code: CodeWithStatus<503>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}
export class GatewayTimeoutError extends GlidepathError {
  constructor(code: CodeWithStatus<504>, message: string, opts?: Opts) {
    super(code, message, opts);
  }
}

/**
 * An error answered by a Glidepath API, as the CLI sees it: the code, status and type as received
 * (a newer server may send a code this build does not know), or one of the CLI's own (ApiError.local).
 */
export class ApiError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** One of the CLI's own codes (the API unreachable, a broken stream…): its type from the table; `status` is the HTTP status received, 0 when none was. */
  static local(code: ErrorCode, message: string, status = 0): ApiError {
    return new ApiError(code, status, errorTypeOf(CATALOGUE[code][0]), message);
  }
}

// ---- configuration ------------------------------------------------------------------------------

export interface ConfigIssue {
  /** Dotted path with indexes, e.g. `models[0].versions[1].tp`. */
  path: string;
  message: string;
  /** 1-based line in the source file, when known. */
  line?: number;
}

export class ConfigError extends GlidepathError {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[], source?: string) {
    const head = source ? `${source}: ` : '';
    const lines = issues.map((i) => `${i.line ? `line ${i.line}: ` : ''}${i.path ? `${i.path}: ` : ''}${i.message}`);
    super('invalid_config', `${head}${issues.length} problem(s)\n  ${lines.join('\n  ')}`, {
      details: { issues },
    });
    this.issues = issues;
  }
}

/** Render any thrown value as a GlidepathError without leaking stack traces. */
export function toGlidepathError(err: unknown): GlidepathError {
  if (err instanceof GlidepathError) return err;
  return new GlidepathError('internal_error', 'internal error', { cause: err });
}

/** Serialized OpenAI error body for any error. */
export function errorBody(err: GlidepathError): string {
  return JSON.stringify(err.toBody());
}
