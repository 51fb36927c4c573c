// Drives runhub's AI SDK chat transports with the official AI SDK ("ai"
// 7.x): DefaultChatTransport against POST /v1/aisdk/chat and
// GET /v1/aisdk/chat/{id}/stream, WebSocketChatTransport (with the "ws"
// package as its WebSocket) against /v1/aisdk/ws. Every stream is read
// with the SDK's own reader, readUIMessageStream, which validates each
// chunk (uiMessageChunkSchema) and assembles the assistant message. It
// prints the assembled messages as JSON for hub/aisdk_test.go to compare
// with the journal; any stream error exits non-zero.
//
// usage: node chat.mjs MODE BASE_URL CHAT_IDS METADATA_JSON
//   CHAT_IDS is comma-separated; METADATA_JSON is the runs' start metadata
//   (sent as body.runhub.metadata).
// MODE:
//   http         sendMessages on each chat, read to the end.
//   http-resume  sendMessages, read CUT chunks of type CUT_TYPE (env; default
//                5 text-delta), abort the fetch (the run goes on), then
//                reconnectToStream. Cut before an approval (CUT_TYPE
//                reasoning-delta, metadata with approval), the run is still
//                active when the stream resumes: the script approves it
//                (choice "once") when the resumed message shows it pending.
//   http-idle    reconnectToStream only (expects no stream: 204).
//   ws           one WebSocketChatTransport, sendMessages on every chat at
//                once, read all to the end.
//   ws-kill      sendMessages, read CUT chunks, close the transport (the
//                socket dies; no abort is sent), then reconnectToStream on a
//                new transport and socket (approving as http-resume does).
//   ws-stop      sendMessages, read CUT text deltas, then abort the request
//                (what useChat's stop() does): the run is cancelled.
//   ws-idle      reconnectToStream only (expects no-active).
// env TOKEN: a bearer token (Authorization header over HTTP; the
// "bearer.<token>" subprotocol over WebSocket).
import { DefaultChatTransport, WebSocketChatTransport, readUIMessageStream } from "ai";
import WebSocket from "ws";

const [mode, base, chatsArg, mdArg] = process.argv.slice(2);
if (!mode || !base || !chatsArg) {
  console.error("usage: node chat.mjs MODE BASE_URL CHAT_IDS [METADATA_JSON]");
  process.exit(2);
}
const chats = chatsArg.split(",");
const metadata = mdArg ? JSON.parse(mdArg) : {};
const token = process.env.TOKEN;
const cut = Number(process.env.CUT || 5);
const cutType = process.env.CUT_TYPE || "text-delta";
const authHeaders = token ? { Authorization: `Bearer ${token}` } : {};

const userMessage = (chat) => ({ id: `u-${chat}`, role: "user", parts: [{ type: "text", text: `hello from ${chat}` }] });
const send = (transport, chat, abortSignal) => transport.sendMessages({
  chatId: chat, messages: [userMessage(chat)], trigger: "submit-message", messageId: undefined, abortSignal, body: { runhub: { metadata } },
});

// assemble reads a UI message stream with the SDK's reader to its end and
// returns the last snapshot: text, reasoning, tools and data parts. An
// approval the message shows pending is answered (choice "once") through
// runhub's approval endpoint.
async function assemble(stream) {
  let last = null;
  const errors = [];
  const approved = new Set();
  for await (const msg of readUIMessageStream({ stream, onError: (e) => errors.push(String(e)), terminateOnError: true })) {
    last = msg;
    for (const p of msg.parts) {
      if (p.type === "data-runhub-approval" && p.data?.status === "pending" && !approved.has(p.id)) {
        approved.add(p.id);
        const res = await fetch(`${base}/v1/runs/${p.data.run_id}/approvals/${p.id}`, {
          method: "POST", headers: { ...authHeaders, "Content-Type": "application/json" }, body: JSON.stringify({ choice: "once" }) });
        if (!res.ok) throw new Error(`approve ${p.id}: ${res.status} ${await res.text()}`);
      }
    }
  }
  return summarize(last, errors);
}

function summarize(msg, errors = []) {
  if (!msg) return null;
  const out = { id: msg.id, text: "", textParts: 0, reasoning: "", tools: [], data: [], errors, metadata: msg.metadata ?? null };
  for (const p of msg.parts) {
    if (p.type === "text") { out.text += p.text; out.textParts++; }
    else if (p.type === "reasoning") out.reasoning += p.text;
    else if (p.type === "dynamic-tool") out.tools.push({ id: p.toolCallId, name: p.toolName, state: p.state, output: p.output ?? null });
    else if (p.type.startsWith("data-")) out.data.push({ type: p.type, id: p.id ?? null, data: p.data });
  }
  return out;
}

// readSome reads chunks until `n` of type cutType went by; the stream
// stays open.
async function readSome(stream, n) {
  const reader = stream.getReader();
  const chunks = [];
  let seen = 0;
  while (seen < n) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the stream ended after ${seen} ${cutType} chunks`);
    chunks.push(value);
    if (value.type === cutType) seen++;
  }
  return { reader, chunks };
}

function wsTransport() {
  const url = base.replace(/^http/, "ws") + "/v1/aisdk/ws";
  const protocols = ["runhub.aisdk", ...(token ? [`bearer.${token}`] : [])];
  return new WebSocketChatTransport({ url, protocols, webSocket: WebSocket });
}

function httpTransport() {
  return new DefaultChatTransport({ api: base + "/v1/aisdk/chat", headers: authHeaders });
}

async function main() {
  switch (mode) {
    case "http": {
      const t = httpTransport();
      const out = {};
      for (const chat of chats) out[chat] = await assemble(await send(t, chat));
      return out;
    }
    case "http-resume": {
      const t = httpTransport();
      const ac = new AbortController();
      const { chunks } = await readSome(await send(t, chats[0], ac.signal), cut);
      ac.abort();
      const stream = await t.reconnectToStream({ chatId: chats[0] });
      if (!stream) throw new Error("reconnectToStream: no active stream");
      return { partial: chunks.length, [chats[0]]: await assemble(stream) };
    }
    case "http-idle":
    case "ws-idle": {
      const t = mode === "ws-idle" ? wsTransport() : httpTransport();
      const stream = await t.reconnectToStream({ chatId: chats[0] });
      t.close?.();
      return { resumed: stream === null ? null : "a stream" };
    }
    case "ws": {
      const t = wsTransport();
      const streams = await Promise.all(chats.map((chat) => send(t, chat)));
      const msgs = await Promise.all(streams.map(assemble));
      t.close();
      return Object.fromEntries(chats.map((chat, i) => [chat, msgs[i]]));
    }
    case "ws-kill": {
      const a = wsTransport();
      const { chunks } = await readSome(await send(a, chats[0]), cut);
      a.close();
      const b = wsTransport();
      const stream = await b.reconnectToStream({ chatId: chats[0] });
      if (!stream) throw new Error("reconnectToStream: no-active");
      const msg = await assemble(stream);
      b.close();
      return { partial: chunks.length, [chats[0]]: msg };
    }
    case "ws-stop": {
      const t = wsTransport();
      const ac = new AbortController();
      const { chunks } = await readSome(await send(t, chats[0], ac.signal), cut);
      ac.abort();
      await t.sendQueue; // the abort frame is on the socket
      t.close();
      return { partial: chunks.length };
    }
  }
  throw new Error(`unknown mode ${mode}`);
}

try {
  console.log(JSON.stringify(await main()));
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
