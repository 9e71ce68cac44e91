// The error catalogue: every code Glidepath answers with, records or audits, with its HTTP status, when it
// happens and what to do; the OpenAI-style `type` follows from the status. `ErrorCode` is the table's
// literal union. The classes that carry the codes, and why each other Error subclass of src/ lives
// where it does, are in src/errors.ts (which re-exports all of this); docs/errors.md is rendered from
// this table (`npm run docs:errors`) and test/unit/repo/errors.test.ts ties the two, and src/, to it.
//
// No message template column: a message names the value that is wrong (the house rule), so almost
// every message is built where the error is thrown; the few fixed ones live in their one class
// (UnauthorizedError, PayloadTooLargeError…) or their one throw site.

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

/** `[HTTP status, when it happens, what to do]`: one row per code. docs/errors.md is generated from it (`npm run docs:errors`). */
type Row = readonly [status: number, when: string, todo: string];

/**
 * Every error code Glidepath answers with, records, or audits. A code has one status: a code that
 * meant two things was split (the simulator's "still loading" is `model_loading` everywhere; a
 * route's expected revision that is out of date is `route_revision_conflict`, 409, on the API as in
 * the data plane). The status of `injected_fault` is the one the fault set names (500 by default).
 */
export const CATALOGUE = {
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
    'The gateway is at its client-connection ceiling (derived from the descriptor limit); sent with Retry-After.',
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
    'The admin API needs `Authorization: Bearer <token>`, and this one is missing or unknown.',
    'Use a token from `auth.tokens` or `<data_dir>/admin-token`.',
  ],
  forbidden: [403, "The token's role is below the route's (viewer < operator < admin). Also audited.", 'Use a token with the role the message names.'],
  invalid_path: [400, 'An admin path with malformed percent-encoding, or an unparsable target (answered before authentication).', 'Encode the path correctly.'],
  not_admin_path: [400, 'An admin request outside `/admin/v1/`.', 'Prefix the path with `/admin/v1`.'],
  invalid_body: [400, 'An admin request body fails its schema; the message lists every bad field with its path.', 'Fix the fields named.'],
  invalid_query: [400, 'A query parameter of an admin route is malformed (a time, a limit, a result).', 'Fix the parameter named.'],
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
  upstream_error: [502, 'The worker answered with a 5xx.', "Check the worker's log; its status is in `details.status`."],
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

  // -- the version registry and routes (admin API) --
  version_exists: [409, 'A version with this (model, id) is already registered; versions are immutable.', 'Register a new id.'],
  version_not_found: [404, 'No version of this id (the message lists the known ones).', 'Use a listed id; `glidepath version list`.'],
  illegal_transition: [409, 'A lifecycle change the transition table forbids; the message names both states.', 'See docs/store.md "Version lifecycle".'],
  invalid_patch: [400, 'A version patch with an invalid field (negative load time…).', 'Fix the field named.'],
  active_exists: [409, 'A second active version of a model.', 'Swap or promote instead.'],
  no_standby: [409, 'No rollback-eligible standby (the message says why each standby is not).', 'Deploy and swap a known-good version instead.'],
  adapter_not_found: [
    404,
    'The model has no adapter of that name (registered through the API, or for a canary, at all).',
    '`glidepath adapter list -m MODEL` shows its adapters.',
  ],
  adapter_name_taken: [
    409,
    "A LoRA adapter's name is already a model's, another model's adapter's, the name a version of another adapter is loaded under, or listed twice (clients name adapters in `model`, so the names share one namespace); or an adapter canary's candidate would be loaded under such a name.",
    'Register the adapter under another name, or remove the other one first (`glidepath adapter remove`).',
  ],
  model_exists: [409, 'The data plane already serves a model of this name.', 'A bug if seen through the API; report it.'],
  card_mismatch: [409, 'A version id already known with another deployment card checksum.', 'Register a new id for the new card.'],
  version_in_route: [409, 'Removing a version that still has weight in the route.', 'Move its traffic first.'],
  worker_not_found: [404, 'No worker of this id in the version.', 'See `glidepath workers`.'],
  invalid_worker: [
    400,
    'A worker list with an empty or repeated id, or a URL that is not http(s)://HOST:PORT; a worker started with a prefill/decode role its version does not have (or without one its version needs).',
    'Fix the endpoint or the role named.',
  ],
  invalid_route: [400, 'Route weights or overrides that do not add up (negative, all zero, unknown version…).', 'Fix the weights named.'],
  route_no_workers: [400, 'A route gives weight to a version with no workers.', 'Deploy the version first.'],
  route_draining: [400, 'A route gives weight to a version being drained.', 'Wait for the drain, or undrain it.'],
  route_conflict: [409, 'The stored route changed since it was read (compare-and-set).', 'Read it again and retry.'],
  route_revision_conflict: [409, 'The route is at another revision than the `expect_revision` given.', 'Read the route again and retry.'],
  route_revision_invalid: [400, 'A route write whose revision does not grow.', 'A bug; report it.'],
  insufficient_gpus: [409, "Not enough free GPUs (with the memory asked) for the version's workers.", 'Free GPUs (retire a standby) or lower replicas/tp.'],
  gpu_in_use: [409, 'A GPU is held by another version or worker.', 'Free it first.'],
  token_hash_exists: [409, 'Two tokens with the same secret.', 'Give each token its own secret.'],
  invalid_config: [
    400,
    'glidepath.yaml (or a config in a request) is invalid; the message lists every problem with its path and line.',
    'Fix each problem named.',
  ],

  // -- blue-green, canary, experiments, rollouts --
  already_active: [409, 'Swapping to the version that is already active.', 'Nothing to do.'],
  stop_start_failed: [
    503,
    'A stop-start whose new version did not come up: the old version was loaded again (or, if that failed too, the message says no version serves).',
    'Read the cause in the message and the audit log; fix the new version and run it again.',
  ],
  already_loaded: [409, 'Deploying a version that is already loaded.', 'Swap to it, or retire it first.'],
  already_loading: [409, 'A canary for a version that is still loading.', 'Wait for it.'],
  already_retired: [409, 'Retiring a retired version.', 'Nothing to do.'],
  ambiguous_green: [400, 'A swap without `--to` while several versions are ready.', 'Name the version with `--to`.'],
  no_green: [409, 'A swap with no ready version to swap in.', 'Run `glidepath deploy green --version V` first.'],
  not_ready: [409, 'Swapping to a version that is not ready or standby.', 'Deploy it first.'],
  retire_active: [409, 'Retiring the active version.', 'Swap or roll back to another version first.'],
  retire_loading: [409, 'Retiring a version while it loads.', 'Wait for the load to finish or fail.'],
  retire_serving: [409, 'Retiring a version that still has weight in the route.', 'Move its traffic first.'],
  retire_standby: [409, 'Retiring the rollback target.', 'Pass `--force` to retire it anyway.'],
  scheduler_version_changed: [
    409,
    "The scheduler started replicas of a model's active version, and meanwhile another version became active or the version was put to sleep: the new replicas were stopped again.",
    'Nothing to do: the next round measures the model again.',
  ],
  rollout_in_progress: [
    409,
    'A canary, experiment, rolling update or other rollout already runs on the model (one at a time; a swap or rollback waits for a rolling update too); or a canary already runs on the adapter (which is neither registered again nor removed meanwhile).',
    'Finish or abort it first.',
  ],
  time_shared_standby: [
    409,
    "A canary, experiment or rolling update of a model whose versions take turns on the same GPUs (`time_shared_standby`, or a time-share group's member): only one version can be awake there.",
    'Deploy green and swap (a rollback wakes the standby); or give the model GPUs of its own for canaries.',
  ],
  time_share_mismatch: [
    409,
    'A version of a time-shared model (a time_sharing member, or a model with time_shared_standby) that does not fit the slots its versions take turns on: another TP, hot spares, prefill/decode roles, static endpoints.',
    "Register the version with the slots' TP and replicas, without spares or roles.",
  ],
  time_shared_asleep: [
    409,
    'An operation that would wake a time-shared model while another has the GPUs (a swap, rollback, stop-start, canary, experiment or rolling update of a model asleep in its group).',
    'Give it the GPUs first (`glidepath scheduler turn GROUP MODEL`), or wait for its turn.',
  ],
  time_share_turn: [
    409,
    'A turn asked of a time-share group that is switching already, or for a model not in the group.',
    'Wait for the switch; name a member.',
  ],
  rollout_conflict: [409, 'The rollout record changed since it was read (another writer).', 'Read it again; a bug if it repeats.'],
  rollout_model_mismatch: [400, 'Writing a rollout under another model than its own.', 'A bug; report it.'],
  rollout_not_found: [
    404,
    'No rollout (canary) of this id for the model or adapter, or none ever ran.',
    'See `glidepath canary status` or `glidepath adapter canary history`.',
  ],
  rollout_state_invalid: [
    500,
    'A stored rollout record cannot be read back (an unknown kind or a corrupt field).',
    'The message names the rollout and field; abort it or restore the store.',
  ],
  canary_is_active: [
    409,
    'A canary of the version that is already active (of a model, or of an adapter: the same version or source).',
    'Canary a new version.',
  ],
  invalid_stages: [400, 'Canary stages that are not increasing percentages ending at 100.', 'Fix the list.'],
  invalid_rollout: [
    400,
    'Rolling-update settings that cannot work: a budget that is not a count or a percentage, a role without replicas, max surge and max unavailable both 0 for a role.',
    'Fix the setting named; allow at least one worker of surge or unavailability.',
  ],
  no_active_version: [409, 'A canary, a stop-start or a rolling update on a model with no active version.', 'Swap a version in first.'],
  no_canary: [409, 'Pausing, resuming, promoting or aborting when no canary runs.', 'Start one first.'],
  not_paused: [409, 'Resuming a canary or a rolling update that is not paused.', 'Nothing to do.'],
  no_rolling_update: [409, 'Pausing, resuming or aborting a rolling update when none runs on the model.', 'See `glidepath rollout status`.'],
  already_paused: [409, 'Pausing a rolling update that is already paused.', 'Resume it, or abort it.'],
  already_rolling_back: [409, 'Aborting a rolling update that is already going back to the old version.', 'Wait for it; `glidepath rollout status --watch`.'],
  nothing_to_undo: [
    409,
    "Undoing when the model's last rolling update did not succeed (or there was none).",
    'Abort a running one instead; roll to a version by name.',
  ],
  not_progressing: [409, 'Pausing a canary that is not progressing.', 'Nothing to do.'],
  not_running: [409, 'Acting on a canary that has ended.', 'Start a new one.'],
  experiment_not_found: [404, 'No experiment of this id for the model.', 'See `glidepath experiment status`.'],
  experiment_running: [409, 'An experiment already runs on the model.', 'Stop it first.'],
  no_experiment: [409, 'Stopping or analysing when no experiment runs.', 'Start one first.'],
  not_loaded: [409, 'An experiment arm that is not loaded.', 'Deploy it first (`glidepath deploy green --version V`).'],
  same_versions: [400, 'An experiment with the same version on both arms.', 'Name two versions.'],
  invalid_split: [400, 'An experiment split not strictly between 0 and 1.', 'Pass e.g. 0.5.'],
  invalid_metric: [400, 'An experiment metric that is not one of the known ones.', 'Use one the message lists.'],
  webhook_unreachable: [502, 'Audited only: a notification webhook could not be reached after its retries.', 'Check the webhook URL.'],
  webhook_refused: [
    502,
    'Audited only: a notification webhook answered an error status after its retries (the status is in the audit params).',
    "Check the webhook's receiver.",
  ],
  metrics_source_unreachable: [
    503,
    'The Prometheus server of `metrics_source` could not be reached or did not answer within `metrics_source.timeout_ms`: a canary look waits (no data), the monitor does not judge; both say so in an event.',
    'Check that Prometheus runs at the URL; the canary resumes judging by itself once it answers.',
  ],
  metrics_source_error: [
    502,
    "The Prometheus server of `metrics_source` answered an error: a status other than 200, `status: error` (Prometheus's message is quoted), a body over `metrics_source.max_response_bytes`, or not its JSON.",
    'Check the URL (the server, not a proxy page), the credentials and the `labels` matchers.',
  ],

  // -- workers and providers --
  interrupted: [503, "A version's failure when Glidepath restarted while it was loading.", 'Deploy it again.'],
  warmup_failed: [503, 'A warm-up request to a new worker failed; the version is not loaded.', "Check the worker's log."],
  worker_start_failed: [503, 'A process worker exited or could not be spawned (the log file is named).', 'Read the worker log.'],
  worker_start_timeout: [
    503,
    "A worker did not become healthy within the provider's start timeout.",
    'Check the worker log; raise the timeout for slow loads.',
  ],
  worker_exited: [503, 'A worker exited before it became healthy.', 'Read the worker log.'],
  wrong_provider: [503, "A provider asked to act on another provider's worker.", 'A bug; report it.'],
  no_endpoint: [503, 'A static version with fewer endpoints than workers.', 'List one endpoint per worker.'],
  bad_command_template: [400, 'A process provider command with an unknown `{placeholder}`.', 'Use the placeholders the message lists.'],
  engine_refused: [502, "An engine's control endpoint (sleep, wake, load) answered an error.", "Check the engine's log."],
  engine_unreachable: [502, "An engine's control endpoint could not be reached.", 'Check that the worker runs.'],

  // -- worker health --
  worker_unhealthy: [
    503,
    'The worker serving a request was taken out of rotation by its health checks (silent corruption) mid-request; before its first byte the request moved to another worker.',
    'Retry; `glidepath workers` says which worker and why.',
  ],
  worker_removed: [
    503,
    "The worker serving a request was removed (the scheduler scaled its model down or preempted it) and its drain's limit passed; before its first byte the request moved to another worker, and a stream already started goes on on another worker of its version.",
    'Retry if it reached you; raise `scheduler.drain_timeout_ms` for long generations.',
  ],
  probe_record_failed: [
    503,
    "A version's probe set could not be recorded: its workers did not answer the probes.",
    "Check the workers' logs; the message names each worker's error.",
  ],
  probe_disagreement: [
    409,
    "A version's workers answered a probe differently with no majority, so nobody can tell the right answer.",
    'Pin a probe set (`glidepath probes pin`), or configure `probe_reference` for the version.',
  ],
  health_disabled: [
    409,
    "The model's health checks are off (`models[].health.enabled: false`): no probe set to record or readmission to do.",
    'Turn them on in the config.',
  ],
  no_serving_worker: [
    409,
    'A probe set was to be recorded from a version with no live serving worker, or a version to be woken on shared GPUs (a time-shared standby) has none.',
    'Deploy or wake the version first.',
  ],
  probe_set_empty: [
    422,
    'No probe prompt has enough reproducible tokens (every answer has a near-tie too early).',
    "Configure other prompts under the model's `health.probes`.",
  ],

  // -- the weight cache --
  cache_miss: [404, "A version's weights are not in the cache.", 'Run `glidepath cache download`.'],
  weights_not_found: [404, 'The weights path does not exist.', 'Fix `weights:` of the version.'],
  weights_unreadable: [400, 'The weights cannot be read (permissions).', 'Fix the permissions.'],
  weights_special_file: [400, 'The weights directory holds a socket, device or FIFO.', 'Remove it.'],
  weights_symlink_cycle: [400, 'The weights directory has a symlink cycle.', 'Fix the links.'],
  weights_too_large: [422, "The weights exceed the cache's per-version limit.", 'Raise `cache.max_bytes`.'],
  invalid_weights_uri: [400, 'A `file://` weights URL that is malformed.', 'Fix the URL.'],
  unsupported_weights_uri: [400, 'Weights with a scheme the cache cannot fetch (s3://, sim://…).', 'Use a path, file://, http:// or https://.'],
  invalid_weight_hash: [400, 'A `weight_hash` that is not `sha256:<64 hex>`.', 'Fix the hash.'],
  weight_hash_mismatch: [422, "Downloaded weights whose hash is not the version's `weight_hash`; the copy was removed.", 'Check the source, or the hash.'],
  download_failed: [502, 'Fetching weights over HTTP failed.', 'Check the URL and the server.'],
  download_timeout: [504, "Fetching weights took longer than the cache's timeout.", 'Retry; raise the timeout.'],
  download_truncated: [502, 'The weights server sent fewer bytes than it announced.', 'Retry.'],

  // -- the store --
  store_open_failed: [
    503,
    'The data directory or its database cannot be opened or migrated.',
    'Check `server.data_dir` (permissions, disk, a file that is not SQLite).',
  ],
  store_schema_too_new: [503, 'The database was written by a newer Glidepath.', 'Run a newer glidepath, or point `server.data_dir` elsewhere.'],
  store_busy: [
    503,
    "Another process holds the database's write lock longer than `busy_timeout` (5 s); with etcd, other replicas' commits won every retry of a transaction.",
    'Retry.',
  ],
  store_unavailable: [
    503,
    'The database failed (disk full, read-only, I/O error, corruption), or etcd cannot be reached or refused the call.',
    'Fix the disk; restore from a backup if corrupt. With etcd: check `store.endpoints`, its health, credentials.',
  ],
  store_not_empty: [
    409,
    'migrate-store was pointed at an etcd prefix that already holds Glidepath state.',
    'Pick an empty `store.prefix`, or delete the old keys first.',
  ],
  no_leader: [
    503,
    'Cluster mode: an admin call reached a replica while no replica leads (an election is under way, or etcd is unreachable).',
    'Retry after a few seconds (the lease TTL).',
  ],
  not_leader: [
    503,
    'Cluster mode: a replica that no longer holds the leader lease tried to write; nothing was written.',
    'Nothing: the new leader carries on. Retry the admin call.',
  ],
  leader_unreachable: [
    502,
    "Cluster mode: the replica could not forward an admin call to the leader's admin API.",
    'Retry; check that the replicas reach each other on `admin_listen`.',
  ],
  store_tx_too_large: [
    503,
    "A store transaction writes more keys than one etcd transaction takes (etcd's `--max-txn-ops`, `store.max_txn_ops`).",
    'Raise both; report it.',
  ],
  store_closed: [503, 'A store call after the store was closed (during shutdown).', 'Nothing; the process is stopping.'],
  store_tx_misuse: [503, 'A transaction handle used after its transaction ended, or beside its own nested transaction.', 'A bug; report it.'],

  // -- the simulator (its OpenAI- and vLLM-compatible API) --
  context_length_exceeded: [400, "Simulator: prompt plus max_tokens exceed the model's context.", 'Send less.'],
  kv_capacity_exceeded: [400, 'Simulator: the request needs more KV cache than the worker has.', 'Send less, or raise the simulated KV capacity.'],
  queue_full: [503, 'Simulator: its waiting queue is full.', 'Retry; add workers.'],
  model_loading: [503, 'Simulator: the model is still loading (requests, sleep).', 'Retry after the delay.'],
  engine_sleeping: [503, 'Simulator: the engine sleeps.', 'POST /wake_up first.'],
  invalid_sleep_level: [400, 'Simulator: a sleep level other than 1 or 2.', 'Pass 1 or 2.'],
  invalid_faults: [400, 'Simulator: a fault set that fails its schema.', 'Fix the fields named.'],
  injected_fault: [500, 'Simulator: an error injected by its fault set (the status the fault names).', 'Nothing; a test asked for it.'],
  kv_role_mismatch: [
    400,
    'Simulator (disaggregated serving): a prefill leg sent to a decode worker, or a decode leg to a prefill worker.',
    'Send each leg to a worker of its role.',
  ],
  kv_layout_mismatch: [
    500,
    'Simulator (disaggregated serving): a decode worker was given KV blocks of another layout (another card: block size, TP, tokenizer) — a prefill and a decode worker of different pools.',
    'Pair workers of the same pool only.',
  ],
  kv_blocks_not_found: [
    404,
    'Simulator: a pull of KV blocks this prefill worker does not hold (never prefilled here, pulled already, or expired).',
    'Pull each transfer once, within its hold time.',
  ],
  kv_transfer_failed: [
    503,
    'Simulator: a decode worker could not pull the KV blocks from the prefill worker named in `kv_transfer_params`.',
    'Retry the pair; check the prefill worker.',
  ],
  kv_transfer_full: [
    503,
    'Simulator: a prefill worker holds as many transfers as it may; decode workers have not pulled them.',
    'Retry after the delay; send the decode legs.',
  ],
  invalid_url: [400, 'Simulator: a malformed request URL.', 'Fix the client.'],
  invalid_lora_request: [400, 'Simulator: a LoRA load without both `lora_name` and `lora_path`.', 'Send both.'],
  lora_disabled: [400, 'Simulator: LoRA requests to a worker with `max_loras = 0`.', 'Enable LoRA on the worker.'],
  lora_already_loaded: [400, 'Simulator: loading an adapter twice.', 'Nothing to do.'],
  lora_not_found: [404, 'Simulator: an unknown adapter.', 'Load it first.'],
  lora_slots_full: [400, 'Simulator: every LoRA slot is taken.', 'Unload an adapter, or raise `max_loras`.'],
  judge_format: [400, "Simulator: a judge request that is not in the judge's prompt format.", 'Use the format of src/analysis/llmjudge.ts.'],

  // -- the CLI --
  api_unreachable: [503, 'CLI: the admin API cannot be reached.', 'Start `glidepath up`, or set GLIDEPATH_URL / --url.'],
  stream_broken: [
    503,
    'CLI: the progress stream of a long operation (deploy, canary start) broke.',
    'Look at `glidepath status`; the operation may have gone on.',
  ],
  invalid_response: [
    502,
    'CLI: the admin API answered with a body that is not JSON, or an error without an error body (a proxy in between?).',
    "Check GLIDEPATH_URL points at `glidepath up`'s admin listener.",
  ],
  stream_incomplete: [503, 'CLI: the progress stream ended without a result (the server stopped?).', "Look at `glidepath status` and the server's log."],
} as const satisfies Record<string, Row>;

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
