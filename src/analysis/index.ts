// Public surface of src/analysis: the canary judge, A/B experiment analysis and the statistics
// they are built on. Pure functions only; nothing here does I/O or imports gateway/api/rollout.

export * from './judge.js';
export * from './ab-test.js';
export * as stats from './stats/index.js';
