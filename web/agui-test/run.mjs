// Drives runhub's AG-UI run endpoint (POST /v1/agui) with the official
// AG-UI client: HttpAgent.runAgent, whose pipeline verifies the event order
// (verifyEvents) and applies the events to the agent's messages; every
// event is also validated with @ag-ui/core's zod schemas (EventSchemas).
// It prints what the AG-UI runs reassemble to as JSON, for
// hub/aguirun_test.go to compare with the journal; an invalid event, order
// or outcome exits non-zero.
//
// usage: node run.mjs MODE URL THREAD MESSAGE FORWARDED_PROPS_JSON
//   MODE agent: runAgent, then while the run ends in an interrupt, answer
//     each (approval: choice "once", else its first choice; clarify: its
//     first choice, or "ok")
//     with resume in a new runAgent.
//   MODE cut: POST a run, read raw SSE until CUT text deltas (env CUT),
//     drop the connection, then POST the same input again with the last
//     SSE id as Last-Event-ID, read with runHttpRequest and
//     transformHttpEventStream, and verify the two parts as one stream.
// env TOKEN: a bearer token for Authorization.
import { HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { from, lastValueFrom, toArray } from "rxjs";

const [mode, url, threadId, message, propsArg] = process.argv.slice(2);
if (!mode || !url || !threadId || !message) {
  console.error("usage: node run.mjs MODE URL THREAD MESSAGE [FORWARDED_PROPS_JSON]");
  process.exit(2);
}
const forwardedProps = propsArg ? JSON.parse(propsArg) : {};
const headers = process.env.TOKEN ? { Authorization: `Bearer ${process.env.TOKEN}` } : {};

function validate(events) {
  for (const ev of events) {
    const r = EventSchemas.safeParse(ev);
    if (!r.success) throw new Error(`event ${JSON.stringify(ev)} does not validate: ${r.error.message}`);
  }
}

function summarize(events) {
  const s = { types: [], texts: {}, tools: {}, results: {}, custom: [], runs: [] };
  for (const ev of events) {
    s.types.push(ev.type);
    switch (ev.type) {
      case "RUN_STARTED": s.runs.push({ runId: ev.runId, threadId: ev.threadId, runhubRun: ev.metadata?.runhub?.run_id ?? null }); break;
      case "RUN_FINISHED": {
        const r = s.runs.at(-1);
        r.end = `RUN_FINISHED:${ev.outcome?.type ?? ""}`;
        r.interrupts = ev.outcome?.interrupts ?? [];
        break;
      }
      case "RUN_ERROR": s.runs.at(-1).end = `RUN_ERROR:${ev.code ?? ""}`; break;
      case "TEXT_MESSAGE_CONTENT": s.texts[ev.messageId] = (s.texts[ev.messageId] ?? "") + ev.delta; break;
      case "TOOL_CALL_START": s.tools[ev.toolCallId] = ev.toolCallName; break;
      case "TOOL_CALL_RESULT": s.results[ev.toolCallId] = ev.content; break;
      case "CUSTOM": s.custom.push(ev.name); break;
    }
  }
  return s;
}

async function agentMode() {
  const agent = new HttpAgent({ url, headers, threadId, initialMessages: [{ id: "u1", role: "user", content: message }] });
  const events = [];
  const runIds = [];
  let resume;
  for (let i = 0; i < 10; i++) {
    let outcome = null;
    let interrupts = [];
    const first = events.length;
    const runId = `agui-run-${i}-${Date.now()}`;
    runIds.push(runId);
    await agent.runAgent({ runId, forwardedProps, ...(resume ? { resume } : {}) }, {
      onEvent: ({ event }) => { events.push(event); },
      onRunFinishedEvent: (p) => { outcome = p.outcome; interrupts = p.interrupts ?? []; },
    });
    // The pipeline of runAgent verified the order already; once more, explicitly.
    await lastValueFrom(from(events.slice(first)).pipe(verifyEvents(), toArray()));
    if (outcome !== "interrupt") break;
    const answers = {};
    for (const it of interrupts) {
      const kind = it.metadata?.runhub?.kind;
      const choices = it.metadata?.runhub?.choices ?? [];
      if (kind === "approval") answers[it.id] = { status: "resolved", payload: { choice: choices.includes("once") ? "once" : choices[0] } };
      else answers[it.id] = { status: "resolved", payload: { response: it.metadata?.runhub?.choices?.[0] ?? "ok" } };
    }
    resume = buildResumeArray(interrupts, answers);
  }
  validate(events);
  const s = summarize(events);
  s.runIds = runIds;
  s.messages = agent.messages.map((m) => ({ id: m.id, role: m.role, content: typeof m.content === "string" ? m.content : null }));
  return s;
}

async function cutMode() {
  const cut = Number(process.env.CUT || 5);
  const input = { threadId, runId: `agui-cut-${Date.now()}`, messages: [{ id: "u1", role: "user", content: message }], tools: [], context: [], forwardedProps };
  const post = (extra) => ({ method: "POST", headers: { ...headers, "Content-Type": "application/json", Accept: "text/event-stream", ...extra }, body: JSON.stringify(input) });
  // Part 1: raw SSE, cut after `cut` text deltas.
  const ac = new AbortController();
  const res = await fetch(url, { ...post({}), signal: ac.signal });
  if (!res.ok) throw new Error(`POST: ${res.status} ${await res.text()}`);
  const first = [];
  let lastId = "";
  let buf = "";
  let deltas = 0;
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  outer: for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let id = "", data = null;
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data = line.slice(6);
      }
      if (data === null) continue;
      const ev = JSON.parse(data);
      first.push(ev);
      lastId = id;
      if (ev.type === "TEXT_MESSAGE_CONTENT" && ++deltas >= cut) break outer;
    }
  }
  ac.abort();
  // Part 2: the official transport, resumed after the last id.
  const rest = await lastValueFrom(transformHttpEventStream(runHttpRequest(() => fetch(url, post({ "Last-Event-ID": lastId })))).pipe(toArray()));
  const all = [...first, ...rest];
  await lastValueFrom(from(all).pipe(verifyEvents(), toArray()));
  validate(all);
  const s = summarize(all);
  s.cutAt = lastId;
  s.firstCount = first.length;
  return s;
}

try {
  const out = mode === "cut" ? await cutMode() : await agentMode();
  console.log(JSON.stringify(out));
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
