// Package agui is the driver of any agent that serves AG-UI (protocol
// 1.0, as @ag-ui/core and @ag-ui/client 1.0.0 define it): a start POSTs a
// RunAgentInput to the profile's url (threadId the session, runId the
// run, messages the session's history unless the agent owns it, the
// profile's tools, context, state and forwarded props) and maps the SSE
// answer onto the run's events, every AG-UI event type included: text
// messages and their chunks are token.delta, reasoning reasoning.delta
// and reasoning.done, tool calls tool.started (when their arguments are
// complete) and tool.done (their result); everything runhub has no event
// of its own for — steps, state and messages snapshots and deltas,
// activity, custom and raw events, subagents, encrypted reasoning, a type
// this build does not know — is progress carrying the AG-UI event as it
// came ("agui"). Nothing is dropped.
//
// A RUN_FINISHED with an interrupt outcome asks each interrupt as an
// approval (a yes or no: reason tool_call or confirmation, or a boolean
// responseSchema) or a clarification, and its answers start the
// continuing AG-UI run (resume[]): to runhub it stays one run that waits
// and goes on. A cancel aborts the request. AG-UI cannot resume a stream,
// so a stream cut before its RUN_FINISHED or RUN_ERROR ends the run with
// provider_error saying so, once; a malformed event too, with what came
// before it journaled. docs/agui.md ("AG-UI agents as runtimes") is the
// reference.
package agui
