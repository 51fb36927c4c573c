// Runs in headless Chromium on a page served from another origin than the
// hub's (cmd/hub/browser_cors_test.go): the official AI SDK transport
// (DefaultChatTransport, what useChat sends through) posts to
// /v1/aisdk/chat and reads the UI message stream with the SDK's reader,
// and the official AG-UI client (HttpAgent) runs POST /v1/agui. Every
// request is cross-origin, so the browser preflights it and needs the
// hub's CORS headers to read the answer. The outcome is left in
// window.__result: {aisdk: {text, errors}, agui: {types, text, error}}.
import { DefaultChatTransport, readUIMessageStream } from "ai";
import { HttpAgent } from "@ag-ui/client";

const hub = new URLSearchParams(location.search).get("hub");
const sim = { sim: { tokens: 5, token_ms: 1, tools: 0 } };

async function aisdk() {
  const transport = new DefaultChatTransport({ api: `${hub}/v1/aisdk/chat` });
  const stream = await transport.sendMessages({
    chatId: "cors-chat", trigger: "submit-message", messageId: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "hello across origins" }] }],
    abortSignal: undefined, body: { runhub: { metadata: sim } },
  });
  const errors = [];
  let last = null;
  for await (const msg of readUIMessageStream({ stream, onError: (e) => errors.push(String(e)) })) {
    last = msg;
  }
  const text = (last?.parts || []).filter((p) => p.type === "text").map((p) => p.text).join("");
  return { text, errors };
}

async function agui() {
  const agent = new HttpAgent({ url: `${hub}/v1/agui`, threadId: "cors-thread",
    initialMessages: [{ id: "u1", role: "user", content: "hello across origins" }] });
  const types = [];
  let text = "";
  await agent.runAgent({ runId: "cors-run-1", forwardedProps: { runhub: { metadata: sim } } }, {
    onEvent: ({ event }) => {
      types.push(event.type);
      if (event.type === "TEXT_MESSAGE_CONTENT") text += event.delta;
    },
  });
  return { types, text };
}

async function main() {
  const out = {};
  try { out.aisdk = await aisdk(); } catch (e) { out.aisdk = { error: String(e) }; }
  try { out.agui = await agui(); } catch (e) { out.agui = { error: String(e) }; }
  window.__result = out;
}
main();
