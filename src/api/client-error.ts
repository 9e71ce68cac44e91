// The admin listener's answer to HTTP that node:http could not parse (an oversized head, a control character in a header…): the catalogue's code and JSON error body instead of node's bare 400/431.
import { maxHeaderSize } from 'node:http';
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { CATALOGUE } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import { closingResponse } from '../gateway/http1/response-writer.js';
import { defaultErrorBody } from '../gateway/http1/server-options.js';

/** llhttp's error codes (and node's own) → the catalogue's. Those not listed are `invalid_header`: most of what is left is a malformed head line. */
const BY_CODE: Readonly<Record<string, ErrorCode>> = {
  HPE_HEADER_OVERFLOW: 'headers_too_large',
  ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout',
  HPE_INVALID_METHOD: 'invalid_method',
  HPE_INVALID_URL: 'invalid_request_target',
  HPE_INVALID_VERSION: 'invalid_http_version',
  HPE_INVALID_CONSTANT: 'invalid_request_line',
  HPE_UNEXPECTED_SPACE: 'invalid_request_line',
  HPE_INVALID_HEADER_TOKEN: 'invalid_header',
  HPE_CR_EXPECTED: 'invalid_line_ending',
  HPE_LF_EXPECTED: 'invalid_line_ending',
  HPE_INVALID_CONTENT_LENGTH: 'invalid_content_length',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'conflicting_framing',
  HPE_INVALID_TRANSFER_ENCODING: 'invalid_transfer_encoding',
  HPE_INVALID_CHUNK_SIZE: 'invalid_chunk',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'invalid_chunk',
};

/** The code, status and message for a client error node:http reported; undefined when there is no one to answer (the client reset or left). */
export function clientErrorAnswer(err: Error & { code?: string; reason?: string }): { status: number; code: ErrorCode; message: string } | undefined {
  if (err.code === 'ECONNRESET' || err.code === 'HPE_INVALID_EOF_STATE') return undefined;
  const code = BY_CODE[err.code ?? ''] ?? 'invalid_header';
  const message =
    code === 'headers_too_large'
      ? `the request line and headers exceed ${maxHeaderSize} bytes`
      : code === 'request_timeout'
        ? 'the request head or body did not arrive in time'
        : `malformed HTTP request: ${err.reason ?? err.message}`;
  return { status: CATALOGUE[code][0], code, message };
}

/**
 * Answer a client error on `socket` and close it. As node:http itself does, nothing is written into a
 * response already under way on the socket (`inFlight`: its current response); the socket is then
 * only destroyed.
 */
export function answerClientError(err: Error & { code?: string; reason?: string }, socket: Duplex, inFlight: ServerResponse | undefined): void {
  socket.on('error', () => undefined);
  const a = clientErrorAnswer(err);
  const started = inFlight !== undefined && inFlight.headersSent && !inFlight.writableEnded;
  if (a === undefined || started || !socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(closingResponse(a.status, defaultErrorBody(a.status, a.code, a.message), ''));
}
