// Defaults of the web dashboard served by the admin listener: sessions, login throttling, the series it charts.
// A reason for each value. Part of DEFAULTS (src/defaults.ts): read them from there.

export const DASHBOARD = {
  /** The dashboard (src/api/dashboard.ts, docs/dashboard.md). */
  dashboard: {
    /** A session unused this long ends: an operator who walks away from the laptop is logged out soon (OWASP: 15–30 min for a powerful role). */
    sessionIdleMs: 15 * 60_000,
    /** However active, a session ends after this: a stolen cookie is worth a working day at most, and a revoked token's sessions were gone at once anyway. */
    sessionMaxMs: 8 * 3_600_000,
    /** Sessions held at once (oldest ended first past it): a few bytes each, so a login storm cannot grow the process. */
    maxSessions: 1_000,
    /**
     * Sessions one token may hold (its own oldest ended past it): a script logging in with any token,
     * a viewer's included, cannot fill the store and so log out every other operator.
     */
    maxSessionsPerToken: 32,
    /** Failed logins one address may make per minute before `login_throttled`: enough for typos, useless for guessing 192-bit tokens anyway. */
    loginFailuresPerMinute: 10,
    /** Addresses whose failures are remembered (oldest forgotten past it). */
    maxLoginAddresses: 4_096,
    /** The largest login body: `{"token": "..."}` is under 100 bytes. */
    maxLoginBodyBytes: 4_096,
    /** The admin API's event streams (/events, /series/stream) send a comment this often: proxies that close idle connections leave them open. */
    eventPingMs: 15_000,
    /** How often an event stream opened with a session cookie checks that its session still lives (it ends with it). */
    streamCheckMs: 5_000,
    /** How often the charts' series are sampled: the dashboard updates once a second. */
    seriesIntervalMs: 1_000,
    /** Samples kept per model (15 minutes at one a second): what a chart shows on opening. */
    seriesPoints: 900,
    /** Points of each side's distribution curve (ECDF) in the canary evidence: smooth on a wall display, a few KiB of JSON. */
    distributionPoints: 120,
  },
} as const;
