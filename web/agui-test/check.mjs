// Reads an AG-UI event stream of runhub (GET /v1/runs/{rid}/agui or
// /v1/sessions/{sid}/agui) with the official AG-UI client: its HTTP/SSE
// transport (runHttpRequest, transformHttpEventStream) and its event-order
// verifier (verifyEvents), then validates every event against @ag-ui/core's
// zod schemas (EventSchemas). It prints what the events reassemble to as
// JSON, for hub/agui_test.go to compare with the journal; any invalid event
// or order exits non-zero.
//
// usage: node check.mjs URL RUNS [LAST_EVENT_ID]
// The stream is read until RUNS runs have ended (RUN_FINISHED or
// RUN_ERROR) or the server ends it; LAST_EVENT_ID, when given, is sent as
// the Last-Event-ID header.
import { runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const [url, runsArg, lastEventID] = process.argv.slice(2);
const wantRuns = Number(runsArg);
if (!url || !(wantRuns > 0)) {
  console.error("usage: node check.mjs URL RUNS [LAST_EVENT_ID]");
  process.exit(2);
}
const headers = { Accept: "text/event-stream" };
if (lastEventID) headers["Last-Event-ID"] = lastEventID;
const ac = new AbortController();
const events = [];
let ended = 0;

await new Promise((resolve, reject) => {
  let sub = null;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    sub?.unsubscribe();
    ac.abort();
    resolve();
  };
  sub = transformHttpEventStream(runHttpRequest(() => fetch(url, { headers, signal: ac.signal })))
    .pipe(verifyEvents())
    .subscribe({
      next: (ev) => {
        events.push(ev);
        if (ev.type === "RUN_FINISHED" || ev.type === "RUN_ERROR") {
          ended++;
          if (ended === wantRuns) finish();
        }
      },
      error: (err) => { done = true; reject(err); },
      complete: finish,
    });
  if (done) sub.unsubscribe();
});

const out = { count: events.length, types: [], runs: [], texts: {}, reasoning: {}, tools: {}, results: {}, custom: [], steps: [] };
for (const ev of events) {
  const r = EventSchemas.safeParse(ev);
  if (!r.success) {
    console.error(`event ${JSON.stringify(ev)} does not validate: ${r.error.message}`);
    process.exit(1);
  }
  out.types.push(ev.type);
  switch (ev.type) {
    case "RUN_STARTED":
      out.runs.push({ runId: ev.runId, threadId: ev.threadId, message: ev.input?.messages?.[0]?.content ?? null });
      break;
    case "RUN_FINISHED":
      out.runs.at(-1).end = `RUN_FINISHED:${ev.outcome?.type ?? ""}`;
      out.runs.at(-1).usage = ev.usage ?? null;
      break;
    case "RUN_ERROR":
      out.runs.at(-1).end = `RUN_ERROR:${ev.code ?? ""}`;
      break;
    case "TEXT_MESSAGE_CONTENT":
      out.texts[ev.messageId] = (out.texts[ev.messageId] ?? "") + ev.delta;
      break;
    case "REASONING_MESSAGE_CONTENT":
      out.reasoning[ev.messageId] = (out.reasoning[ev.messageId] ?? "") + ev.delta;
      break;
    case "TOOL_CALL_START":
      out.tools[ev.toolCallId] = { name: ev.toolCallName, args: "" };
      break;
    case "TOOL_CALL_ARGS":
      out.tools[ev.toolCallId].args += ev.delta;
      break;
    case "TOOL_CALL_RESULT":
      out.results[ev.toolCallId] = ev.content;
      break;
    case "STEP_STARTED":
    case "STEP_FINISHED":
      out.steps.push(`${ev.type} ${ev.stepName}`);
      break;
    case "CUSTOM":
      out.custom.push(ev.name);
      break;
  }
}
if (ended !== wantRuns) {
  console.error(`the stream ended after ${ended} of ${wantRuns} runs`);
  process.exit(1);
}
console.log(JSON.stringify(out));
