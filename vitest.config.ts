import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start real processes; two files at a time suit a 2-core machine.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
