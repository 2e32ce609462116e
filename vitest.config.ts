import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'sdk/test/**/*.test.ts',
      'client/test/**/*.test.ts',
      'cli/test/**/*.test.ts',
      'core/test/**/*.test.ts',
      'plugins/*/test/**/*.test.ts',
      'examples/*/test/**/*.test.ts',
      'test/**/*.test.ts',
    ],
    exclude: ['**/node_modules/**', '**/dist/**'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // Two cores: tests drive real processes (agent, dockerd, nginx, databases); more workers only add contention.
    maxWorkers: 2,
    reporters: ['default'],
    server: {
      deps: {
        // The SDK's bundles and the in-process harness's (what @agent/sdk and @agent/sdk/testing load) are loaded by
        // Node, as from a plugin's node_modules, not transformed by Vite as workspace files are: one SDK for the
        // kernel and the plugin sources under test (the kernel checks `instanceof Reply`), and no 4 s spent on the
        // harness's 2.6 MB at every run.
        external: [/\/sdk\/dist\/bundle\//, /\/testing\/dist\/harness\.mjs$/],
      },
    },
  },
});
