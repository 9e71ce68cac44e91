// Error codes of the data plane: HTTP framing, clients and their limits, OpenAI requests and their upstreams.
// One part of the error catalogue (src/errors/catalogue.ts joins the parts in this order).
import type { Row } from './row.js';

export const DATA_PLANE_CODES = {
  // -- HTTP framing (the gateway's HTTP/1.1 front; both listeners) --
  invalid_request_line: [400, 'The request line is not METHOD SP target SP HTTP/x.y.', 'Fix the client; this is not HTTP/1.1.'],
  invalid_method: [400, 'The method is not a token (RFC 9110).', 'Fix the client.'],
  invalid_request_target: [400, 'The request target has bytes a URL cannot hold, or is not origin-form.', 'Send an origin-form path (`/v1/…`).'],
  invalid_http_version: [400, 'The HTTP version is malformed.', 'Send HTTP/1.1.'],
  http_version_not_supported: [505, 'An HTTP version other than 1.0 or 1.1.', 'Send HTTP/1.1.'],
  invalid_header: [
    400,
    'A header line is malformed: no colon, space before the colon, a bad name, a control character, or obs-fold.',
    'Fix the client; the message names the line.',
  ],
  invalid_line_ending: [400, 'A bare LF or CR where CRLF is required.', 'End lines with CRLF.'],
  invalid_host: [400, 'The Host header is missing on HTTP/1.1, repeated, or not a valid host[:port] (RFC 9112 §3.2).', 'Send one valid Host header.'],
  invalid_content_length: [400, 'Content-Length is not a plain decimal, or several differ.', 'Send one Content-Length.'],
  invalid_transfer_encoding: [
    400,
    'Transfer-Encoding is malformed or not final-chunked, or HTTP/1.0 sent it.',
    'Send `Transfer-Encoding: chunked` or a Content-Length.',
  ],
  unsupported_transfer_encoding: [501, 'A transfer coding other than chunked (gzip, deflate…).', 'Send the body uncompressed, chunked or with a length.'],
  conflicting_framing: [400, 'Both Content-Length and Transfer-Encoding (a smuggling vector, RFC 9112 §6.1).', 'Send one of them.'],
  invalid_chunk: [400, 'A chunk size, extension, CRLF or trailer of a chunked body is malformed.', "Fix the client's chunked encoding."],
  expectation_failed: [417, 'An Expect header other than 100-continue.', 'Drop the header.'],
  headers_too_large: [
    431,
    'The request line and headers (or chunked trailers) exceed `gateway.max_header_bytes`.',
    'Send fewer or smaller headers, or raise the limit.',
  ],
  body_too_large: [413, "The body exceeds the listener's body limit (`gateway.max_body_bytes` on the data plane).", 'Send less, or raise the limit.'],
  request_timeout: [408, 'The request head or body did not arrive within `gateway.request_timeout_ms`.', 'Send the whole request promptly; check the network.'],
  body_read_failed: [400, 'The connection failed while the body was being read.', 'Retry; check the network between client and gateway.'],
  unsupported_content_type: [415, 'A body that is not `application/json`.', 'Send JSON with `content-type: application/json`.'],
  invalid_json: [400, 'The body is not valid JSON, not an object, or nested deeper than 256 levels.', 'Send one JSON object.'],
  method_not_allowed: [405, 'The path exists but not with this method.', 'Use the method the Allow header lists.'],
  not_found: [404, 'No endpoint at this path.', 'Check the path (`/v1/…` on the data plane, `/admin/v1/…` on the admin API).'],
  internal_error: [500, 'A bug: an exception Glidepath did not expect. The log has the stack.', 'Report it with the log line.'],

  // -- clients and limits --
  server_overloaded: [
    503,
    "The gateway is at its client-connection ceiling (derived from the descriptor limit; over HTTP/2 a stream past its connection's first counts half a connection); sent with Retry-After.",
    'Retry after the delay; add replicas or raise `ulimit -n`.',
  ],
  too_many_connections: [
    429,
    'One address holds more connections than `limits.<listener>.per_client_connections`.',
    "Reuse connections; raise the limit for a balancer's address.",
  ],
  tier_shed: [
    429,
    "The model is degraded (too few healthy workers for its required throughput) and sheds this request's priority tier; sent with Retry-After.",
    'Retry after the delay, or send with a higher tier (an API key or the trusted tier header, docs/resilience.md).',
  ],
  degraded_unavailable: [
    503,
    'The model is at degradation level 4 (under a quarter of its required capacity): it accepts no new requests until workers come back; sent with Retry-After.',
    'Retry after the delay; check the workers of the model (glidepath workers).',
  ],
  rate_limited: [
    429,
    'One address sends faster than `limits.<listener>.per_client_rps` (burst `per_client_burst`); sent with Retry-After.',
    'Slow down, or raise the limit.',
  ],
  unauthorized: [
    401,
    'The admin API needs `Authorization: Bearer <token>` (or a dashboard session cookie), and this one is missing or unknown, or the `gp_session` cookie is malformed.',
    'Use a token from `auth.tokens` or `<data_dir>/admin-token`.',
  ],
  forbidden: [403, "The token's role is below the route's (viewer < operator < admin). Also audited.", 'Use a token with the role the message names.'],
  session_expired: [
    401,
    'A dashboard session cookie that is unknown, idle past its lifetime (15 min) or older than its hard limit (8 h), or whose token was revoked.',
    'Log in again at /dashboard/ (the page sends you there).',
  ],
  csrf_rejected: [
    403,
    "A change (any non-GET) authenticated by the dashboard session cookie without the session's CSRF token in `x-glidepath-csrf`, or from another origin.",
    'Send changes from the dashboard page itself, or use a bearer token.',
  ],
  login_throttled: [429, 'Too many failed dashboard logins from one address within a minute; sent with Retry-After.', 'Wait, then log in with a valid token.'],
  dashboard_not_built: [503, "The dashboard's front end was not built (no `dist/web/index.html`).", 'Run `npm run build`.'],
  invalid_path: [400, 'An admin path with malformed percent-encoding, or an unparsable target (answered before authentication).', 'Encode the path correctly.'],
  not_admin_path: [400, 'An admin request outside `/admin/v1/`.', 'Prefix the path with `/admin/v1`.'],
  invalid_body: [400, 'An admin request body fails its schema; the message lists every bad field with its path.', 'Fix the fields named.'],
  invalid_query: [
    400,
    'A query parameter of an admin route is malformed or out of range (a time before 1970 or past the year 275760, a limit, a result, an event id), or so is the `Last-Event-ID` header of `GET /events`.',
    'Fix the parameter or header named.',
  ],
  invalid_limit: [400, 'A list `limit` that is not a positive integer.', 'Pass a positive integer.'],
  metrics_failed: [500, 'Rendering `/metrics` failed (a bug in a collector).', 'Report it with the log line.'],

  // -- OpenAI requests on the data plane --
  invalid_request: [400, 'A field of a chat or completion request is wrong; `param` names it.', 'Fix the field (see the OpenAI API reference).'],
  time_share_group_not_found: [404, 'No time-share group of this name.', 'See `glidepath scheduler status` for the groups.'],
  model_not_found: [404, 'No model of this name is served (the message lists those that are).', 'Use one of the models listed.'],
  unknown_version: [
    400,
    "The version header (`gateway.version_header`) names a version not in the model's route.",
    'Name a version in the route, or drop the header.',
  ],
  version_unavailable: [503, 'The chosen version is not accepting requests (being removed).', 'Retry; the route moves traffic elsewhere.'],
  hold_queue_full: [503, 'The model is switching versions (drain-first swap) and its hold queue is full.', 'Retry after the delay; raise `hold_queue_max`.'],
  hold_timeout: [503, 'The model is switching versions and the request waited longer than `hold_timeout_ms`.', 'Retry; make drains shorter.'],
  adapter_slots_busy: [
    503,
    "Every LoRA slot of the worker chosen (its engine's `max_loras`) holds an adapter a request is using, so the adapter asked for cannot be loaded there; no other worker could take it.",
    "Retry after the delay; raise the engine's `max_loras`, add replicas, or spread traffic over fewer adapters.",
  ],
  adapter_load_failed: [
    503,
    'The worker could not load the LoRA adapter (the engine refused it, its source is unreadable, or the worker went away); no other worker could take it.',
    "Check the adapter's `source` (`glidepath adapter list`) and the worker's log; the message carries the engine's reason.",
  ],
  adapter_unsupported: [
    503,
    "The version the request was routed to serves no LoRA adapters: its engine's `max_loras` is 0 or undeclared.",
    'Declare `engine.max_loras` on the version (the simulator: `sim.max_loras`) and start its engine with `--max-loras`.',
  ],
  no_healthy_workers: [503, 'Every worker of the version is ejected or gone.', "Look at `glidepath workers`; the workers' logs say why."],
  worker_queue_full: [
    503,
    "Every request slot of the worker is busy (its engine's `max_num_seqs`, at most `connections_per_worker`) and its wait queue (`worker_queue_max`) is full, or a request of a higher tier took this one's place; no other worker had room.",
    'Add replicas; raise `max_num_seqs` or `worker_queue_max`; see `glidepath capacity`.',
  ],
  worker_queue_timeout: [
    503,
    'The request waited longer than `queue_timeout_ms` for a request slot of a worker. Not counted against the worker.',
    'Add replicas; long streams hold connections.',
  ],
  local_resources_exhausted: [
    503,
    'The gateway itself ran out of file descriptors or memory connecting to a worker (EMFILE, ENOBUFS…). Never counted against the worker.',
    'Raise `ulimit -n`; add gateway replicas.',
  ],
  drain_aborted: [503, 'The version was drained and the drain timed out before this request finished.', 'Retry; raise `gateway.drain_timeout_ms`.'],
  upstream_timeout: [
    504,
    'The worker sent no first token (no answer, non-streaming) within the deadline; the wait for a connection is not counted.',
    'Check the worker; raise `first_token_timeout_ms`.',
  ],
  upstream_idle_timeout: [
    504,
    'The worker went silent mid-response for `idle_timeout_ms`.',
    'Check the worker (a hang); the request was not retried after bytes were sent.',
  ],
  upstream_connect_failed: [
    502,
    'The worker refused or dropped the connection; it is ejected for a while and the request retried elsewhere when possible.',
    'Check the worker process.',
  ],
  upstream_closed: [502, 'The worker closed the connection before answering, or mid-response.', "Check the worker's log."],
  upstream_error: [
    502,
    'The worker answered with a 5xx, or sent its own error event in the middle of a stream (an exception in the engine; resumed on another worker when the stream can be).',
    "Check the worker's log; its status is in `details.status`, a mid-stream error's message in the error's.",
  ],
  upstream_kv_transfer_failed: [
    502,
    'Disaggregated serving: the decode worker could not pull the KV blocks the prefill worker named (it stopped, or the blocks expired); retried with a new prefill, never held against the decode worker.',
    'Check the prefill workers of the version.',
  ],
  upstream_invalid_json: [502, 'The worker answered 200 with a body that is not JSON.', 'Check the worker (a corrupt or wrong engine).'],
  upstream_malformed_stream: [502, "The worker's SSE stream is malformed.", 'Check the worker.'],
  upstream_truncated: [502, 'The worker ended a stream without `[DONE]`.', "Check the worker's log."],
  upstream_stream_broken: [
    502,
    'The worker dropped the stream after it started, and it could not be continued on another worker (sent as an SSE error event; the message says why it was not resumed).',
    'Check the worker; the client got a partial answer. docs/resilience.md lists what cannot be resumed.',
  ],
  upstream_resume_refused: [
    502,
    "A broken stream's continuation was refused by the worker asked to continue it (4xx; sent as an SSE error event).",
    "Set the version provider's `resume` to what its engine supports (docs/resilience.md).",
  ],
  upstream_response_too_large: [502, 'A non-streaming answer larger than 16 × the body limit.', 'Check the worker; stream long answers.'],
  upstream_client_error: [
    400,
    'Recorded only: the worker answered 4xx; its status and body were passed to the client unchanged.',
    'Fix the request the worker refused.',
  ],
  upstream_shadow_failed: [502, 'Recorded only: a shadow copy to the candidate failed. The client never sees it.', "Check the shadow version's workers."],
  client_closed: [502, 'Recorded only (status 499): the client went away before the answer ended; the worker was released.', 'Nothing; a client cancelled.'],
  client_send_timeout: [
    502,
    'Recorded only (status 499): the client read nothing of a response for `gateway.send_timeout_ms`; it was closed and the worker released.',
    'Fix the slow client; raise the timeout for very slow readers.',
  ],
} as const satisfies Record<string, Row>;
