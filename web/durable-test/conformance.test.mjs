// The official Durable Streams server conformance suite, run by vitest
// against the hub whose base URL the Go test passes (DS_BASE_URL), with the
// long-poll timeout the hub was given (DS_LONG_POLL_MS), with the opt-in
// subscription extension (webhook and pull-wake subscriptions).
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

runConformanceTests({
  baseUrl: process.env.DS_BASE_URL,
  longPollTimeoutMs: Number(process.env.DS_LONG_POLL_MS || 20000),
  subscriptions: true,
})
