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
  },
});
