// Every error Glidepath raises: a stable code, an HTTP status, and its OpenAI-style rendering.

/** OpenAI-compatible error `type` values used on the data plane. */
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

export interface ErrorBody {
  error: { message: string; type: ErrorType; code: string; param?: string | null };
}

/** Base class: every Glidepath error has a stable `code` that callers branch on, never the message. */
export class GlidepathError extends Error {
  readonly code: string;
  readonly status: number;
  readonly type: ErrorType;
  /** Extra fields for admin API responses (never secrets). */
  readonly details: Record<string, unknown> | undefined;
  /** Seconds a client should wait before retrying (sets `Retry-After`). */
  readonly retryAfterS: number | undefined;

  constructor(
    code: string,
    status: number,
    type: ErrorType,
    message: string,
    opts: { details?: Record<string, unknown>; retryAfterS?: number; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.type = type;
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

type Opts = { details?: Record<string, unknown>; retryAfterS?: number; cause?: unknown };

// ---- client errors (4xx) ----------------------------------------------------------------------

export class BadRequestError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 400, 'invalid_request_error', message, opts);
  }
}
export class UnauthorizedError extends GlidepathError {
  constructor(message = 'missing or invalid bearer token', opts?: Opts) {
    super('unauthorized', 401, 'authentication_error', message, opts);
  }
}
export class ForbiddenError extends GlidepathError {
  constructor(message: string, opts?: Opts) {
    super('forbidden', 403, 'permission_error', message, opts);
  }
}
export class NotFoundError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 404, 'not_found_error', message, opts);
  }
}
export class MethodNotAllowedError extends GlidepathError {
  constructor(message: string) {
    super('method_not_allowed', 405, 'invalid_request_error', message);
  }
}
export class ConflictError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 409, 'conflict_error', message, opts);
  }
}
export class PayloadTooLargeError extends GlidepathError {
  constructor(limit: number) {
    super('body_too_large', 413, 'invalid_request_error', `request body exceeds the limit of ${limit} bytes`);
  }
}
export class UnsupportedMediaTypeError extends GlidepathError {
  constructor(got: string | undefined) {
    super(
      'unsupported_content_type',
      415,
      'invalid_request_error',
      `content-type must be application/json, got ${got ? JSON.stringify(got) : 'none'}`,
    );
  }
}
export class UnprocessableError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 422, 'invalid_request_error', message, opts);
  }
}
export class TooManyRequestsError extends GlidepathError {
  constructor(code: string, message: string, retryAfterS?: number) {
    super(code, 429, 'rate_limit_error', message, retryAfterS === undefined ? {} : { retryAfterS });
  }
}

// ---- server / upstream errors (5xx) -------------------------------------------------------------

export class InternalError extends GlidepathError {
  constructor(message = 'internal error', opts?: Opts) {
    super('internal_error', 500, 'server_error', message, opts);
  }
}
export class UpstreamError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 502, 'upstream_error', message, opts);
  }
}
export class UnavailableError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 503, 'unavailable_error', message, opts);
  }
}
export class GatewayTimeoutError extends GlidepathError {
  constructor(code: string, message: string, opts?: Opts) {
    super(code, 504, 'timeout_error', message, opts);
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
    super('invalid_config', 400, 'invalid_request_error', `${head}${issues.length} problem(s)\n  ${lines.join('\n  ')}`, {
      details: { issues },
    });
    this.issues = issues;
  }
}

/** Render any thrown value as a GlidepathError without leaking stack traces. */
export function toGlidepathError(err: unknown): GlidepathError {
  if (err instanceof GlidepathError) return err;
  return new InternalError('internal error', { cause: err });
}

/** Serialized OpenAI error body for any error. */
export function errorBody(err: GlidepathError): string {
  return JSON.stringify(err.toBody());
}
