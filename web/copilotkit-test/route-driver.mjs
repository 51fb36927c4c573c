// route-driver runs a Next.js App Router route file (the CopilotKit
// runtime snippet of docs/integrations.md) the way Next.js and
// CopilotKit's client use it, without Next.js: it bundles the route with
// esbuild (TypeScript stripped, packages resolved from node_modules),
// calls its GET with the runtime's /info and its POST with an agent run
// (the AG-UI RunAgentInput CopilotKit's client posts to
// <runtimeUrl>/agent/<agentId>/run), and prints what came back: the agents
// the runtime lists, the type of each event of the run's SSE answer, one
// per line, and the assistant's text.
//
//   node route-driver.mjs route.ts
import { build } from "esbuild";
import { randomUUID } from "node:crypto";

const route = process.argv[2];
await build({ entryPoints: [route], bundle: true, platform: "node", format: "esm", packages: "external",
  outfile: "route.bundle.mjs", logLevel: "error" });
const { GET, POST } = await import("./route.bundle.mjs");
const base = "http://localhost:3000/api/copilotkit";

const info = await GET(new Request(base + "/info"));
if (!info.ok) throw new Error(`GET /info: ${info.status} ${await info.text()}`);
console.log("agents:", Object.keys((await info.json()).agents ?? {}).join(" "));

const input = { threadId: randomUUID(), runId: randomUUID(), state: {}, tools: [], context: [], forwardedProps: {},
  messages: [{ id: randomUUID(), role: "user", content: "hello from CopilotKit" }] };
const res = await POST(new Request(base + "/agent/default/run", { method: "POST",
  headers: { "content-type": "application/json", accept: "text/event-stream" }, body: JSON.stringify(input) }));
if (!res.ok) throw new Error(`POST /agent/default/run: ${res.status} ${await res.text()}`);
let said = "";
for (const block of (await res.text()).split("\n\n")) {
  const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
  if (!data) continue;
  const ev = JSON.parse(data);
  console.log(ev.type);
  if (ev.type === "RUN_ERROR") console.log("error:", ev.message);
  if (ev.type === "TEXT_MESSAGE_CONTENT") said += ev.delta;
}
console.log("said:", said.trim());
