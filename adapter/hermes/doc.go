// Package hermes is the runtime driver for a Hermes Agent API server's
// /v1/runs API: each runhub run is one Hermes run, and the driver only
// translates — upstream events in, contract events out, controls mapped
// back. It keeps no agent loop of its own.
//
// Start: POST /v1/runs with the message as input, the session's earlier
// turns (from the journal) as conversation_history and runhub's session
// id as session_id; the Hermes run id is journaled as progress ("started
// Hermes run <id>"), by which a hub restart does not end the run: the
// driver is a driver.Reattacher (reattach.go). A stopping hub leaves the
// Hermes run going (driver.ErrDetached: no POST /stop), and start-up
// recovery hands the run back to the driver, which checks GET
// /v1/runs/{id} and follows the run as after a cut stream (below) — by
// its status alone once Hermes dropped its event stream — to the end
// Hermes gives it. After a re-attach the streamed text is not journaled
// (what Hermes sent while the hub was down is partly lost); the final
// output is, as the rest of the message the journal holds or as a message
// of its own, so no text is journaled twice. A run Hermes no longer
// knows (404) ends interrupted; one waiting on an approval the journal
// never saw, or on a clarify question an earlier runhub journaled (its
// clarify id is not journaled), ends interrupted and is stopped; a journaled approval
// nobody answered is asked again. A run without a journaled id (it never
// reached Hermes) ends interrupted, and StopOrphan has nothing to stop.
// Hermes Agent (0.18.x) ignores
// Idempotency-Key there, so a start is sent again only when it provably
// never reached Hermes (the connection could not be opened); one whose
// answer was lost ends the run with provider_error naming the uncertainty
// rather than risk a second Hermes run. With Config.IdempotentStart (a
// server that replays a retried key) the key, runhub's run id, is sent
// and such starts are retried.
//
// Events (GET /v1/runs/{id}/events, held by exactly one subscriber):
//
//	message.delta {delta}                   token.delta {message_id, text}
//	reasoning.available {text}              held until the next event: dropped when
//	                                        that text was streamed or is part of the
//	                                        final output (Hermes fills it with the
//	                                        assistant message's own text), else as
//	                                        reasoning.delta
//	reasoning.delta {text|delta}            reasoning.delta {block_id, text}
//	                                        (+ reasoning.done when the block ends)
//	tool.started {tool, preview}            tool.started {tool_call_id, name, args: {preview}}
//	tool.completed {tool, duration, error}  tool.done {tool_call_id, status, duration_ms, error}
//	approval.request {command, description,
//	  choices, request_id?}                 approval.requested with Hermes' choices and
//	                                        risk; Hermes sends no risk, so risk is ""
//	                                        and unknown names it (and choices, when a
//	                                        server sends none); the user's choice is
//	                                        posted to /approval. Approvals are asked
//	                                        one at a time, in Hermes' order: 0.18.x
//	                                        resolves a run's oldest pending approval
//	                                        when an answer names no request_id
//	approval.responded {choice}             nothing for runhub's own answer; a prompt
//	                                        Hermes settled elsewhere gets its one
//	                                        approval.resolved, with Hermes' choice as
//	                                        made (offered or not)
//	clarify.request {question|questions}    progress: the question, not relayed (the
//	                                        runs API has no clarify endpoint, so
//	                                        nothing is ever posted for it)
//	clarify.retired / clarify.responded     nothing
//	run.steered                             progress
//	subagent.start / subagent.complete      progress
//	run.completed {output, usage}           unstreamed output as token.delta, usage.final,
//	                                        then done (written by the executor)
//	run.failed {error}                      terminal error provider_error (redacted)
//	run.cancelled                           terminal cancelled
//
// Controls: cancel → POST /stop (within StopTimeout even though the run's
// context is done); queue mode steer → POST /steer {input}.
//
// The upstream stream has no ids and no replay. When it breaks (read error,
// end without a terminal event, or StreamIdleTimeout without even a
// keepalive) the driver polls GET /v1/runs/{id}: a settled run ends the
// same way here (completed → done, failed → error, cancelled → cancelled),
// a gone (404) or interrupted one ends with error interrupted, and a run
// still going is resubscribed — if Hermes dropped the stream (a resubscribe
// answered 404) and the run has not ended, the Hermes run is stopped and
// the run ends interrupted. A resubscribed stream may never bring the
// terminal event: Hermes shares the run's one queue with the handler of the
// broken connection, which drops it once it notices, and the new stream
// then carries only keepalives. So after any reconnect the status is
// polled every PollInterval alongside the stream, and a terminal status
// there ends the run the same way (after PollInterval more for the stream
// to bring its own terminal event).
// A run that sends nothing but keepalives for EventIdleTimeout while no
// prompt waits on the user ends with error timeout.
//
// The API key goes only into the Authorization header; upstream text that
// reaches the journal or the logs is scrubbed of it and redacted.
package hermes
