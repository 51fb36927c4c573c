// Tests of static/runhub-client.js with a scripted WebSocket, run by
// `node --test` (TestClientJS in embed_test.go runs this file when node is
// installed). The client has no imports, so it loads from a data: URL and
// needs no package.json.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const src = await readFile(new URL("../static/runhub-client.js", import.meta.url), "utf8");
const { RunhubClient, parseFrame, parseCursor } = await import(`data:text/javascript,${encodeURIComponent(src)}`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// FakeWS records what the client sends and lets a test play the hub.
class FakeWS {
  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.readyState = 0;
    this.sent = [];
    this.closed = null;
    FakeWS.all.push(this);
  }
  send(s) {
    for (const line of s.split("\n")) this.sent.push(JSON.parse(line));
  }
  close(code, reason) {
    this.readyState = 3;
    this.closed = { code, reason };
  }
  // hub side
  accept() {
    this.readyState = 1;
    this.onopen && this.onopen({});
  }
  recv(...msgs) {
    this.onmessage && this.onmessage({ data: msgs.map((m) => JSON.stringify(m)).join("\n") });
  }
  drop(code = 1006, reason = "") {
    this.readyState = 3;
    this.onclose && this.onclose({ code, reason });
  }
  types() {
    return this.sent.map((m) => m.type);
  }
}
FakeWS.all = [];

const WELCOME = { type: "welcome", protocol: "runhub.v1", conn_id: "c1", hub_id: "h1", subject: "local", limits: {} };

function ev(run, seq, session = "s1", type = "token.delta", payload = { message_id: "m1", text: `w${seq} ` }) {
  return { type: "event", event: { event_id: `${run}:${seq}`, seq, run_id: run, session_id: session, type, created_at: 1, terminal: false, payload } };
}

function newClient(opts = {}) {
  FakeWS.all = [];
  const c = new RunhubClient({
    url: "ws://hub/v1/ws",
    WebSocket: FakeWS,
    backoff: { initialMs: 5, maxMs: 20, factor: 2, jitter: 0 },
    pingIntervalMs: 0,
    controlTimeoutMs: 200,
    ...opts,
  });
  const seen = { event: [], status: [], replayed: [], reset: [], gap: [], error: [], state: [] };
  for (const k of Object.keys(seen)) c.on(k, (v) => seen[k].push(v));
  return { c, seen, ws: () => FakeWS.all[FakeWS.all.length - 1] };
}

async function connected(opts) {
  const t = newClient(opts);
  t.c.connect();
  t.ws().accept();
  t.ws().recv(WELCOME);
  return t;
}

test("parseFrame splits NDJSON and skips bad lines", () => {
  const bad = [];
  const msgs = parseFrame('{"type":"a"}\n\n{"type":"b"}\nnot json\n{"x":1}\n', (line) => bad.push(line));
  assert.deepEqual(msgs.map((m) => m.type), ["a", "b"]);
  assert.equal(bad.length, 2);
});

test("parseCursor splits at the last colon", () => {
  assert.deepEqual(parseCursor("r_1:42"), { run_id: "r_1", seq: 42 });
  assert.equal(parseCursor("nope"), null);
  assert.equal(parseCursor("r:"), null);
});

test("hello goes first, subscriptions wait for welcome", () => {
  const { c, ws } = newClient({ token: "tok" });
  c.watch({ all: true });
  c.focus("s1");
  c.connect();
  assert.deepEqual(ws().protocols, ["runhub.v1"]);
  assert.equal(c.state, "connecting");
  ws().accept();
  assert.deepEqual(ws().sent, [{ type: "hello", token: "tok", client: "runhub-web/1", capabilities: ["compact_replay"] }]);
  ws().recv(WELCOME);
  assert.equal(c.state, "open");
  assert.deepEqual(ws().sent.slice(1), [
    { type: "watch", all: true },
    { type: "focus", session_id: "s1" },
  ]);
});

test("a frame with several messages is handled in order, events deduplicated", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2), ev("r1", 2), { type: "replayed", session_id: "s1", cursor: "r1:2", count: 2 }, ev("r1", 1), ev("r1", 3));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3]);
  assert.equal(seen.replayed.length, 1);
  assert.equal(c.cursorOf("s1"), "r1:3");
  assert.equal(c.lastSeq("r1"), 3);
  assert.equal(c.replaying, false);
});

test("events of a session that is not focused are dropped", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r9", 1, "s2"), { type: "replayed", session_id: "s2", cursor: "", count: 0 });
  assert.equal(seen.event.length, 0);
  assert.equal(seen.replayed.length, 0);
});

test("a seq gap re-focuses from the last contiguous event", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2), ev("r1", 5), ev("r1", 6));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2]);
  assert.deepEqual(seen.gap, [{ run_id: "r1", after_seq: 2, got_seq: 5 }]);
  const focuses = ws().sent.filter((m) => m.type === "focus");
  assert.deepEqual(focuses[focuses.length - 1], { type: "focus", session_id: "s1", cursor: "r1:2" });
  assert.equal(focuses.length, 2, "one resync per gap");
  ws().recv(ev("r1", 3), ev("r1", 4), ev("r1", 5));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3, 4, 5]);
  // a later run starts at seq 1; starting elsewhere is a gap too
  ws().recv(ev("r2", 1));
  assert.equal(seen.event.length, 6);
});

test("reconnect re-sends hello, the watch set and the focus with the resume cursor", async () => {
  const { c, seen, ws } = await connected({ token: "t" });
  c.watch({ all: true });
  c.watch(["s7"]);
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2), ev("r1", 3));
  const first = ws();
  first.drop(1006);
  assert.equal(c.state, "reconnecting");
  await sleep(30);
  assert.notEqual(ws(), first, "a new socket");
  ws().accept();
  ws().recv(WELCOME);
  assert.deepEqual(ws().sent, [
    { type: "hello", token: "t", client: "runhub-web/1", capabilities: ["compact_replay"] },
    { type: "watch", all: true },
    { type: "watch", sessions: ["s7"] },
    { type: "focus", session_id: "s1", cursor: "r1:3" },
  ]);
  // the hub resumes after the cursor; a duplicate at the seam is dropped
  ws().recv(ev("r1", 3), ev("r1", 4));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3, 4]);
});

test("goaway delays the reconnect by reconnect_after_ms", async () => {
  const { c, ws } = await connected();
  const first = ws();
  first.recv({ type: "goaway", reason: "restart", reconnect_after_ms: 80 });
  const t0 = Date.now();
  first.drop(1012, "restart");
  await sleep(40);
  assert.equal(ws(), first, "not before reconnect_after_ms");
  while (ws() === first && Date.now() - t0 < 1000) await sleep(5);
  assert.notEqual(ws(), first);
  assert.ok(Date.now() - t0 >= 80);
  c.close();
});

test("backoff grows between failed attempts", async () => {
  const { c, seen, ws } = newClient();
  c.connect();
  ws().drop(1006);
  await sleep(8);
  ws().drop(1006);
  const delays = seen.state.filter((s) => s.state === "reconnecting").map((s) => s.delay_ms);
  assert.deepEqual(delays, [5, 10]);
  c.close();
  assert.equal(c.state, "closed");
});

test("controls resolve with their control_result, reject on timeout and on an error naming them", async () => {
  const { c, ws } = await connected();
  const p = c.start({ message: "hi", metadata: { sim: { tokens: 3 } } });
  const sent = ws().sent[ws().sent.length - 1];
  assert.equal(sent.type, "control");
  assert.equal(sent.op, "start");
  assert.deepEqual(sent.metadata, { sim: { tokens: 3 } });
  ws().recv({ type: "control_result", id: "other", accepted: true, status: "accepted" });
  ws().recv({ type: "control_result", id: sent.id, accepted: true, status: "accepted", run_id: "r1", session_id: "s1" });
  const r = await p;
  assert.equal(r.run_id, "r1");

  const bad = c.approve({ run_id: "r1", approval_id: "a1", choice: "once" });
  const bid = ws().sent[ws().sent.length - 1].id;
  ws().recv({ type: "error", code: "bad_request", message: "nope", ref: bid });
  await assert.rejects(bad, (err) => err.code === "bad_request");

  await assert.rejects(c.cancel({ run_id: "r1" }), (err) => err.code === "client_timeout");
});

test("a control issued while disconnected is refused at once and never sent later; a sent one fails on drop", async () => {
  const { c, ws } = await connected();
  const sentBefore = c.queue({ session_id: "s1", message: "later" });
  ws().drop(1006);
  await assert.rejects(sentBefore, (err) => err.code === "client_disconnected");
  const p = c.goal({ session_id: "s1", action: "pause" });
  await assert.rejects(p, (err) => err.code === "client_disconnected" && /not sent/.test(err.message));
  await sleep(30);
  ws().accept();
  ws().recv(WELCOME);
  assert.equal(ws().sent.filter((m) => m.type === "control").length, 0, "a refused control was sent after the reconnect");
  // Once welcomed again, controls go out.
  const q = c.goal({ session_id: "s1", action: "pause" });
  const ctl = ws().sent.find((m) => m.type === "control");
  assert.equal(ctl.op, "goal");
  ws().recv({ type: "control_result", id: ctl.id, accepted: false, status: "unsupported", message: "no goals here" });
  assert.equal((await q).status, "unsupported");
  c.close();
});

test("4401 stops reconnecting", async () => {
  const { c, ws } = newClient();
  c.connect();
  ws().accept();
  ws().recv({ type: "error", code: "unauthorized", message: "bad token", ref: "hello" });
  ws().drop(4401, "unauthorized");
  await sleep(30);
  assert.equal(FakeWS.all.length, 1);
  assert.equal(c.state, "unauthorized");
});

test("bad_cursor resets the session so the fallback replay is delivered", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1", { cursor: "r1:5" });
  assert.deepEqual(ws().sent[ws().sent.length - 1], { type: "focus", session_id: "s1", cursor: "r1:5" });
  ws().recv({ type: "error", code: "bad_cursor", message: "unknown", ref: "focus" }, ev("r1", 1), ev("r1", 2));
  assert.deepEqual(seen.reset, [{ session_id: "s1", reason: "unknown" }]);
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2]);
});

test("focus with cursor null forgets what was delivered", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2));
  c.focus("s2");
  c.focus("s1", { cursor: null });
  assert.deepEqual(ws().sent[ws().sent.length - 1], { type: "focus", session_id: "s1" });
  ws().recv(ev("r1", 1));
  assert.equal(seen.event.length, 3);
  c.focus(null);
  assert.deepEqual(ws().sent[ws().sent.length - 1], { type: "focus", session_id: null });
});

test("a status behind the one held is dropped", async () => {
  const { c, seen, ws } = await connected();
  const st = (seq, status) => ({ type: "status", session: { session_id: "s1", run_id: "r1", last_seq: seq, status } });
  ws().recv(st(5, "running"), st(4, "queued"), st(6, "completed"));
  assert.deepEqual(seen.status.map((s) => s.status), ["running", "completed"]);
  assert.equal(c.sessions.get("s1").status, "completed");
});

test("a deleted status drops the session and reaches the listeners", async () => {
  const { c, seen, ws } = await connected();
  c.watch(["s1", "s2"]);
  c.focus("s1");
  ws().recv({ type: "status", session: { session_id: "s1", run_id: "r1", last_seq: 2, status: "completed" } }, ev("r1", 1));
  assert.equal(c.lastSeq("r1"), 1);
  ws().recv({ type: "status", session: { session_id: "s1", run_id: "", last_seq: 0, status: "", deleted: true } });
  assert.equal(c.sessions.has("s1"), false);
  assert.equal(c.lastSeq("r1"), 0);
  assert.equal(seen.status.length, 2);
  assert.equal(seen.status[1].deleted, true);
  // A reconnect watches what is left.
  ws().drop(1006);
  await sleep(30);
  ws().accept();
  ws().recv(WELCOME);
  assert.deepEqual(ws().sent.filter((m) => m.type === "watch"), [{ type: "watch", sessions: ["s2"] }]);
});

test("ping resolves with the pong", async () => {
  const { c, ws } = await connected();
  const p = c.ping();
  const m = ws().sent[ws().sent.length - 1];
  assert.equal(m.type, "ping");
  ws().recv({ type: "pong", id: m.id, time: 1 });
  const r = await p;
  assert.equal(r.id, m.id);
  assert.ok(r.rtt_ms >= 0);
});

test("a resumed replay that misses the session's newer run fetches it from its start", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2));
  c.focus("s2");
  ws().recv({ type: "status", session: { session_id: "s1", run_id: "r2", last_seq: 7, status: "completed" } });
  c.focus("s1");
  assert.deepEqual(ws().sent[ws().sent.length - 1], { type: "focus", session_id: "s1", cursor: "r1:2" });
  ws().recv({ type: "replayed", session_id: "s1", cursor: "r1:2", count: 0 });
  assert.deepEqual(ws().sent[ws().sent.length - 1], { type: "focus", session_id: "s1", cursor: "r2:0" });
  assert.deepEqual(seen.gap, [{ run_id: "r2", after_seq: 0, got_seq: 7 }]);
  ws().recv(ev("r2", 1), { type: "replayed", session_id: "s1", cursor: "r2:1", count: 1 });
  assert.equal(ws().sent.filter((m) => m.type === "focus").length, 4, "no second resync once the run arrives");
  assert.deepEqual(seen.event.map((e) => `${e.run_id}:${e.seq}`), ["r1:1", "r1:2", "r2:1"]);
});

test("a newer run named by status whose events never come is fetched after a grace period", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), { type: "replayed", session_id: "s1", cursor: "r1:1", count: 1 });
  ws().recv({ type: "status", session: { session_id: "s1", run_id: "r2", last_seq: 3, status: "running" } });
  const focuses = () => ws().sent.filter((m) => m.type === "focus");
  assert.equal(focuses().length, 1);
  await sleep(1200);
  assert.deepEqual(focuses()[1], { type: "focus", session_id: "s1", cursor: "r2:0" });
  assert.equal(seen.gap.length, 1);
  c.close();
});

test("a newer run whose events do come is left alone", async () => {
  const { c, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), { type: "replayed", session_id: "s1", cursor: "r1:1", count: 1 });
  ws().recv({ type: "status", session: { session_id: "s1", run_id: "r2", last_seq: 1, status: "running" } }, ev("r2", 1));
  await sleep(1200);
  assert.equal(ws().sent.filter((m) => m.type === "focus").length, 1);
  c.close();
});

// jwt builds an unsigned token with the given exp (seconds); the client only
// reads exp, the hub verifies.
function jwt(expMs, sub = "alice") {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ sub, exp: expMs / 1000 })}.sig`;
}

test("jwtExpiry reads exp and ignores what is not a JWT", async () => {
  const { jwtExpiry } = await import(`data:text/javascript,${encodeURIComponent(src)}`);
  assert.equal(jwtExpiry(jwt(1700000000000)), 1700000000000);
  assert.equal(jwtExpiry("opaque-token"), 0);
  assert.equal(jwtExpiry("a.!!!.c"), 0);
  assert.equal(jwtExpiry(""), 0);
});

test("setToken on an open socket renews it with a fresh hello; the second welcome restores nothing", async () => {
  const { c, ws } = await connected({ token: "t1" });
  const renewed = [];
  c.on("renewed", (w) => renewed.push(w));
  c.watch({ all: true });
  c.focus("s1");
  const before = ws().sent.length;
  c.setToken("t2");
  assert.deepEqual(ws().sent.slice(before), [{ type: "hello", token: "t2", client: "runhub-web/1", capabilities: ["compact_replay"] }]);
  ws().recv(WELCOME);
  assert.equal(renewed.length, 1);
  assert.equal(ws().sent.length, before + 1, "no watch or focus re-sent after a renewal");
  assert.equal(c.state, "open");
});

test("getToken renews a JWT before it expires, on the same socket", async () => {
  let n = 0;
  const tokens = [jwt(Date.now() + 150), jwt(Date.now() + 3600e3)];
  const t = newClient({ getToken: () => tokens[Math.min(n++, 1)], renewBeforeMs: 100 });
  t.c.connect();
  t.ws().accept();
  await sleep(0); // getToken runs before the first hello
  assert.deepEqual(t.ws().sent[0], { type: "hello", token: tokens[0], client: "runhub-web/1", capabilities: ["compact_replay"] });
  t.ws().recv(WELCOME);
  await sleep(200);
  const hellos = t.ws().sent.filter((m) => m.type === "hello");
  assert.equal(hellos.length, 2, "a renewal hello ~50 ms in");
  assert.equal(hellos[1].token, tokens[1]);
  assert.equal(FakeWS.all.length, 1, "renewed without reconnecting");
  t.c.close();
});

test("4401 with a getToken that has a new token reconnects with it; without one the client stops", async () => {
  let tok = "old";
  const t = newClient({ getToken: async () => tok });
  t.c.connect();
  t.ws().accept();
  await sleep(0);
  t.ws().recv(WELCOME);
  tok = "new";
  t.ws().drop(4401, "token expired");
  await sleep(50);
  assert.equal(FakeWS.all.length, 2, "reconnected");
  t.ws().accept();
  await sleep(0);
  assert.equal(t.ws().sent[0].token, "new");
  t.ws().recv(WELCOME);
  t.ws().drop(4401, "token expired"); // getToken still says "new": no way in
  await sleep(50);
  assert.equal(FakeWS.all.length, 2);
  assert.equal(t.c.state, "unauthorized");
});

test("a token shorter-lived than renewBeforeMs is renewed halfway, not in a loop", async () => {
  let calls = 0;
  const t = newClient({ getToken: () => (calls++, jwt(Date.now() + 400)), renewBeforeMs: 60000 });
  t.c.connect();
  t.ws().accept();
  await sleep(0);
  t.ws().recv(WELCOME);
  await sleep(100);
  const hellos = () => t.ws().sent.filter((m) => m.type === "hello").length;
  assert.equal(hellos(), 1, "no renewal in the first half of the token's life");
  await sleep(200); // ~200 ms in: renewed once
  assert.equal(hellos(), 2);
  t.ws().recv(WELCOME);
  await sleep(50);
  assert.equal(hellos(), 2, "the renewed token is not renewed at once");
  assert.ok(calls <= 3, `getToken called ${calls} times`);
  t.c.close();
});

test("a token valid for months does not make the client renew at once", async () => {
  let calls = 0;
  const t = newClient({ getToken: () => (calls++, jwt(Date.now() + 90 * 864e5)) });
  t.c.connect();
  t.ws().accept();
  await sleep(0);
  t.ws().recv(WELCOME);
  await sleep(50);
  assert.equal(calls, 1, "getToken only for the hello");
  assert.equal(t.ws().sent.filter((m) => m.type === "hello").length, 1);
  t.c.close();
});

// A compacted record (protocol.md §5.6) stands for seq_from..seq.
function rec(run, from, seq, text, session = "s1") {
  const m = ev(run, seq, session, "token.delta", { message_id: "m1", text });
  m.event.seq_from = from;
  return m;
}

test("compacted records advance the cursor to their seq; live events follow", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1, "s1", "run.started", {}), rec("r1", 2, 257, "w0 … w255 "), rec("r1", 258, 300, "w256 … "), { type: "replayed", session_id: "s1", cursor: "r1:300", count: 300 }, ev("r1", 301));
  assert.deepEqual(seen.event.map((e) => [e.seq_from ?? e.seq, e.seq]), [[1, 1], [2, 257], [258, 300], [301, 301]]);
  assert.equal(c.cursorOf("s1"), "r1:301");
  assert.equal(seen.gap.length, 0);
  // a reconnect resumes exactly after the last record
  ws().drop(1006);
  await sleep(30);
  ws().accept();
  ws().recv(WELCOME);
  assert.deepEqual(ws().sent.filter((m) => m.type === "focus").pop(), { type: "focus", session_id: "s1", cursor: "r1:301" });
  c.close();
});

test("a compacted record that overlaps what was delivered is refetched, never applied twice", async () => {
  const { c, seen, ws } = await connected();
  c.focus("s1");
  ws().recv(ev("r1", 1), ev("r1", 2), ev("r1", 3), rec("r1", 2, 9, "dup"));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3]);
  assert.deepEqual(ws().sent.filter((m) => m.type === "focus").pop(), { type: "focus", session_id: "s1", cursor: "r1:3" });
  // a record after a gap is a gap too
  ws().recv(rec("r1", 6, 9, "late"));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3]);
  ws().recv(rec("r1", 4, 9, "right"));
  assert.deepEqual(seen.event.map((e) => e.seq), [1, 2, 3, 9]);
  c.close();
});

test("compact: false sends no capability", async () => {
  const { c, ws } = newClient({ compact: false });
  c.connect();
  ws().accept();
  assert.deepEqual(ws().sent, [{ type: "hello", client: "runhub-web/1" }]);
  c.close();
});

test("the default backoff is capped at 5 s and retryNow reconnects at once", async () => {
  FakeWS.all = [];
  const c = new RunhubClient({ url: "ws://hub/v1/ws", WebSocket: FakeWS, pingIntervalMs: 0, backoff: { jitter: 0 } });
  const delays = [];
  c.on("state", (s) => s.state === "reconnecting" && s.delay_ms && delays.push(s.delay_ms));
  c.connect();
  for (let i = 0; i < 8; i++) {
    const w = FakeWS.all[FakeWS.all.length - 1];
    w.drop(1006);
    c.retryNow();
    assert.notEqual(FakeWS.all[FakeWS.all.length - 1], w, "retryNow opened a new socket");
  }
  assert.ok(delays.length >= 8);
  assert.equal(Math.max(...delays), 250, "retryNow starts the backoff over");
  // without retryNow the delay grows to the cap and no further
  const d2 = [];
  c.on("state", (s) => s.state === "reconnecting" && s.delay_ms && d2.push(s.delay_ms));
  for (let i = 0; i < 8; i++) {
    FakeWS.all[FakeWS.all.length - 1].drop(1006);
    clearTimeout(c._retryTimer);
    c._retryTimer = null;
    c._open();
  }
  assert.equal(Math.max(...d2), 5000);
  c.close();
});
