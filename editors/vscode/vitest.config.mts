import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The server start-up and the first analysis take a few seconds on a loaded 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // One server at a time: the files share nothing, but two servers would compete for the cores.
    fileParallelism: false,
  },
});
