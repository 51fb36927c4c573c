import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    testTimeout: 60000,
    hookTimeout: 60000,
    fileParallelism: false,
  },
})
