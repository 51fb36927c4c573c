// Package web is runhub's browser workbench: plain static files (HTML, CSS
// and ES modules, no build step and no runtime dependencies) embedded in the
// binary and served by Handler.
//
// The files under static/:
//
//   - index.html, app.js, style.css: the workbench. A session list on the
//     left with a live status badge per session (watch {all:true}); the
//     focused session's transcript on the right (user message, assistant
//     text, reasoning, tool cards, approval and clarify prompts, terminal
//     banner; a steer shows as the user's entry) with the controls the
//     session's active_controls allow, a start form carrying the simulator
//     options as metadata.sim, queue and goal inputs, and rename (PATCH
//     /v1/sessions/{sid}) and delete (DELETE /v1/sessions/{sid}) controls.
//   - transcript.js: renders one session's events, one section per run,
//     oldest first: the socket's focus brings the latest run and what
//     follows, and the earlier runs are read over HTTP (GET
//     /v1/sessions/{sid}/runs, then each run's events), a page at a time as
//     the user scrolls up. cards.js: its tool, approval and clarify
//     cards. markdown.js: the small Markdown renderer of
//     assistant text (code blocks, lists, links with http/https/mailto
//     only, emphasis; raw HTML stays text); a growing message re-renders
//     only its blocks after the last one that is final. catchup.js: the
//     focused session's catch-up, which the history read waits for (the
//     replayed run is not read over HTTP too) and during which text is
//     rendered at most every 250 ms. dom.js: element and formatting
//     helpers. Hub text only ever enters the page as text nodes.
//   - runhub-client.js: the reusable protocol v1 client (no DOM code; its API
//     is documented at the top of the file): one WebSocket per tab to /v1/ws
//     with subprotocol runhub.v1, hello/welcome, watch, focus with a resume
//     cursor, controls as Promises, NDJSON frame parsing, dedupe by
//     run_id+seq with gap repair, reconnect with backoff and jitter (and
//     after goaway, no earlier than reconnect_after_ms). A control issued
//     while the socket is down is refused at once, never replayed later;
//     the workbench then shows an offline banner and disables what sends.
//
// jstest/ holds the client's tests against a scripted socket, the
// Markdown renderer's against a minimal DOM (unsafe links and HTML, random
// input, streams rendered from their last final block) and the catch-up's
// with a fake clock; go test runs them with node (TestClientJS).
//
// Elements the browser tests drive carry data-testid attributes; window.runhub
// is the client instance.
//
// Handler is safe for concurrent use; the embedded files never change at run
// time.
package web
