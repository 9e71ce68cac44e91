// The test run: every file in parallel (forked processes), then the latency-bound end-to-end files one
// at a time. Those assert a client-observed p99 or a detection time (a premium TTFT SLO, a worker's
// death noticed, other clients served during a fuzz storm, a canary judged on real engines' latency)
// or start many processes (three replicas and etcd): on a 2-CPU machine, two such runs side by side
// measure each other, not the gateway.
import { configDefaults, defineConfig } from 'vitest/config';

// the dashboard's asserts that the page shows a rollback within a second of the server's event, with a browser beside the fleet;
// engine-canary judges real engines' latency on the two cores, which other files' load would skew
const ALONE = [
  'test/e2e/shedding.test.ts',
  'test/e2e/health.test.ts',
  'test/e2e/fuzz.test.ts',
  'test/e2e/cluster*.test.ts',
  'test/e2e/dashboard.test.ts',
  'test/e2e/engine-canary.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'parallel', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...ALONE], sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: 'alone', include: ALONE, poolOptions: { forks: { singleFork: true, isolate: true } }, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
