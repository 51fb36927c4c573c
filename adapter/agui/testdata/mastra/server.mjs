// A real AG-UI server for adapter/agui's tests (and docs/agui.md's
// example): a Mastra agent ("travel") whose model is scripted with
// Mastra's own test model (MastraLanguageModelV2Mock), so no network is
// needed, wrapped by @ag-ui/mastra's MastraAgent (an AG-UI AbstractAgent)
// and served as the AG-UI integrations serve one: each POSTed
// RunAgentInput runs the agent, and its events go out through
// @ag-ui/encoder's EventEncoder over node:http; an error of the run is a
// RUN_ERROR event.
//
// The script: to a user message naming "book", the model says a
// sentence and calls weather(city); with the weather it calls book(city),
// a tool that suspends for approval (Mastra's suspend, resumeSchema
// {approved: boolean}), which @ag-ui/mastra ends as an interrupt outcome;
// the continuing run (resume) runs book with the answer and the model
// says how it went. To any other message it answers "You said: <text>".
//
// usage: node server.mjs   (PORT=n for a fixed port; prints {"url": …})
import http from "node:http";
import { Mastra } from "@mastra/core";
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { InMemoryStore } from "@mastra/core/storage";
import { MastraLanguageModelV2Mock } from "@mastra/core/test-utils/llm-mock";
import { MastraAgent } from "@ag-ui/mastra";
import { EventEncoder } from "@ag-ui/encoder";
import { z } from "zod";

const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };

function stream(parts) {
  return {
    stream: new ReadableStream({
      start(c) {
        c.enqueue({ type: "stream-start", warnings: [] });
        for (const p of parts) c.enqueue(p);
        c.close();
      },
    }),
  };
}

const text = (id, s) => [{ type: "text-start", id }, { type: "text-delta", id, delta: s }, { type: "text-end", id }];
const call = (id, name, input) => ({ type: "tool-call", toolCallId: id, toolName: name, input: JSON.stringify(input) });
const finish = (reason) => ({ type: "finish", finishReason: reason, usage });

function userText(m) {
  if (typeof m.content === "string") return m.content;
  return m.content.filter((p) => p.type === "text").map((p) => p.text).join("");
}

const model = new MastraLanguageModelV2Mock({
  modelId: "scripted",
  doStream: async ({ prompt }) => {
    const last = prompt.at(-1);
    const results = prompt.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p) => p.type === "tool-result");
    if (last.role === "user") {
      const said = userText(last);
      if (!said.includes("book")) return stream([...text("t1", "You said: " + said), finish("stop")]);
      return stream([...text("t1", "Checking the weather in Oslo. "), call("call-weather", "weather", { city: "Oslo" }), finish("tool-calls")]);
    }
    const booked = results.find((r) => r.toolName === "book");
    if (!booked) return stream([call("call-book", "book", { city: "Oslo" }), finish("tool-calls")]);
    const ok = booked.output?.value?.booked === true;
    return stream([...text("t2", ok ? "It is sunny: your trip is booked." : "It is sunny; nothing was booked."), finish("stop")]);
  },
});

const weather = createTool({
  id: "weather",
  description: "The weather in a city",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => ({ city, sky: "sunny", celsius: 21 }),
});

const book = createTool({
  id: "book",
  description: "Books a trip, once the user approves",
  inputSchema: z.object({ city: z.string() }),
  resumeSchema: z.object({ approved: z.boolean() }),
  execute: async ({ city }, ctx) => {
    const answer = ctx?.agent?.resumeData;
    if (!answer) return ctx.agent.suspend({ question: `Book a trip to ${city}?` });
    return { city, booked: answer.approved === true };
  },
});

const travel = new Agent({ id: "travel", name: "travel", instructions: "Plan trips.", model, tools: { weather, book } });
const mastra = new Mastra({ agents: { travel }, storage: new InMemoryStore(), logger: false });

const server = http.createServer(async (req, res) => {
  if (req.method !== "POST") {
    res.writeHead(405, { Allow: "POST" }).end();
    return;
  }
  let body = "";
  for await (const chunk of req) body += chunk;
  let input;
  try {
    input = JSON.parse(body);
  } catch {
    res.writeHead(400, { "Content-Type": "application/json" }).end(JSON.stringify({ error: "the body is not JSON" }));
    return;
  }
  const agent = MastraAgent.getLocalAgent({ mastra, agentId: "travel", resourceId: "runhub" });
  const encoder = new EventEncoder({ accept: req.headers.accept });
  res.writeHead(200, { "Content-Type": encoder.getContentType(), "Cache-Control": "no-cache" });
  const sub = agent.run(input).subscribe({
    next: (event) => res.write(encoder.encode(event)),
    error: (err) => {
      res.end(encoder.encode({ type: "RUN_ERROR", message: String(err?.message ?? err) }));
    },
    complete: () => res.end(),
  });
  res.on("close", () => sub.unsubscribe());
});

server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}/` }));
});
