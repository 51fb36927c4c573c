// app.js — the runhub workbench: the session list (status of every session,
// watch {all:true}) and the focused pane (the transcript of one session,
// focus with a resume cursor), wired to one RunhubClient.
//
// Rendering is batched: client callbacks only record what changed, and one
// animation frame applies it (a background tab, which gets no frames, falls
// back to a timer).

import { RunhubClient } from "./runhub-client.js";
import { SessionView } from "./transcript.js";
import { h, statusLabel, fmtCount, fmtAgo, shortId } from "./dom.js";

// Transcripts kept for sessions that lost focus; the oldest is dropped (and
// replayed in full when focused again) past this.
const MAX_VIEWS = 24;

const $ = (id) => document.getElementById(id);
const els = {
  conn: document.querySelector('[data-testid="conn-state"]'),
  connText: document.querySelector(".conn-text"),
  theme: $("theme-toggle"),
  list: $("session-list"),
  count: $("session-count"),
  emptyList: $("empty-list"),
  filter: $("session-filter"),
  newSession: $("new-session"),
  title: $("pane-title"),
  status: $("pane-status"),
  progress: $("pane-progress"),
  tokens: $("pane-tokens"),
  run: $("pane-run"),
  replaying: $("pane-replaying"),
  stop: $("stop-button"),
  scroll: $("transcript-scroll"),
  transcript: $("transcript"),
  emptyPane: $("empty-pane"),
  jump: $("jump-latest"),
  goalForm: $("goal-form"),
  goalState: $("goal-state"),
  goalText: $("goal-text"),
  goalInput: $("goal-input"),
  queueForm: $("queue-form"),
  queueInput: $("queue-input"),
  queueMode: $("queue-mode"),
  queueDepth: $("queue-depth"),
  startForm: $("start-form"),
  startMessage: $("start-message"),
  startNew: $("start-new-session"),
  startSubmit: $("start-submit"),
  startProfile: $("start-profile"),
  simOptions: $("sim-options"),
  sim: {
    tokens: $("sim-tokens"),
    tokenMs: $("sim-token-ms"),
    reasoning: $("sim-reasoning"),
    tools: $("sim-tools"),
    approval: $("sim-approval"),
    clarify: $("sim-clarify"),
    fail: $("sim-fail"),
  },
  toasts: $("toasts"),
};

// ---- the client ----------------------------------------------------------

const params = new URLSearchParams(location.search);
if (params.has("token")) {
  localStorage.setItem("runhub.token", params.get("token"));
  params.delete("token");
  history.replaceState(null, "", `${location.pathname}${params.size ? `?${params}` : ""}${location.hash}`);
}
// The token lives in localStorage: a page opened with a newer ?token=
// updates it for every tab, and each tab's client takes it before every
// hello and to renew its socket before the token expires.
const currentToken = () => localStorage.getItem("runhub.token") || "";
const rh = new RunhubClient({ token: currentToken(), getToken: currentToken, client: "runhub-web/1" });
window.runhub = rh;

// ---- state ---------------------------------------------------------------

const items = new Map(); // session_id → list item
const views = new Map(); // session_id → SessionView, least recently focused first
let focused = null;
let stopping = null; // run id a cancel was sent for
const dirtyItems = new Set();
let paneDirty = true;
let orderDirty = false;
let stickToBottom = true;

const viewCtx = (sid) => ({
  status: () => rh.sessions.get(sid),
  approve: async (run, card, choice) => {
    await control(rh.approve({ run_id: run.id, approval_id: card.id, choice }), "approve");
  },
  clarify: async (run, card, response) => {
    await control(rh.clarify({ run_id: run.id, clarify_id: card.id, response }), "clarify");
  },
});

// control awaits a control's result and reports anything but accepted.
async function control(promise, what) {
  try {
    const r = await promise;
    if (!r.accepted) toast(`${what}: ${r.status}${r.message ? ` — ${r.message}` : ""}`, "warn");
    return r;
  } catch (err) {
    toast(`${what}: ${err.message}`, "error");
    return null;
  }
}

// ---- frame scheduling ----------------------------------------------------

let frameQueued = false;
function schedule() {
  if (frameQueued) return;
  frameQueued = true;
  const run = () => {
    if (!frameQueued) return;
    frameQueued = false;
    render();
  };
  requestAnimationFrame(run);
  setTimeout(run, 150);
}

function render() {
  const sc = els.scroll;
  const atBottom = sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48;
  let grew = false;
  for (const v of views.values()) if (v.flush()) grew = grew || v.sessionId === focused;
  const statusChanged = dirtyItems.size > 0;
  for (const sid of dirtyItems) renderItem(sid);
  dirtyItems.clear();
  if (orderDirty) reorder();
  if (statusChanged) renderTitle();
  if (paneDirty) renderPane();
  if (grew) {
    if (stickToBottom || atBottom) {
      sc.scrollTop = sc.scrollHeight;
      stickToBottom = false;
    } else {
      els.jump.hidden = false;
    }
  }
}

// ---- connection ----------------------------------------------------------

rh.on("state", ({ state, delay_ms: delay }) => {
  els.conn.dataset.state = state;
  const text = {
    idle: "idle",
    connecting: "connecting…",
    open: "connected",
    reconnecting: delay ? `reconnecting in ${Math.max(1, Math.round(delay / 1000))}s` : "reconnecting…",
    unauthorized: "unauthorized",
    closed: "offline",
  }[state];
  els.connText.textContent = text || state;
  els.conn.title = state === "open" && rh.welcome ? `connected to ${rh.welcome.hub_id || "hub"} as ${rh.welcome.subject || "?"}` : "connection to the hub";
  if (state === "unauthorized") toast("The hub refused the token. Add ?token=… to the URL.", "error");
});
rh.on("open", (w) => {
  els.conn.title = `connected to ${w.hub_id || "hub"} as ${w.subject || "?"}`;
  paneDirty = true;
  schedule();
});
rh.on("status", (s) => {
  if (!items.has(s.session_id)) orderDirty = true;
  const prev = items.get(s.session_id);
  if (prev && prev.updatedAt !== s.updated_at) orderDirty = true;
  dirtyItems.add(s.session_id);
  if (s.session_id === focused) paneDirty = true;
  schedule();
});
rh.on("event", (e) => {
  const v = views.get(e.session_id);
  if (!v) return;
  v.push(e);
  schedule();
});
rh.on("replayed", (m) => {
  if (m.session_id !== focused) return;
  stickToBottom = true;
  paneDirty = true;
  schedule();
});
rh.on("reset", ({ session_id: sid }) => {
  const v = views.get(sid);
  if (v) v.clear();
  schedule();
});
rh.on("goaway", (m) => toast(`Hub is going away (${m.reason || "restart"}); reconnecting…`, "info"));
rh.on("error", (m, info) => {
  if (m.code === "client_bad_frame" || m.code === "client_hello_timeout") console.warn("runhub:", m);
  if (m.code === "bad_cursor") return; // handled by reset: the hub replays from the start
  if (m.code === "not_found" && m.ref === "focus" && focused && String(m.message).includes(focused)) {
    // A stale link (#/s/…) or a session that is gone.
    const v = views.get(focused);
    if (v && !v.runs.size) views.delete(focused);
    focusSession(null);
  }
  if (info && info.settled) return; // the control's own promise reports it
  toast(`${m.code}: ${m.message || ""}`, "error");
});

// ---- session list --------------------------------------------------------

function renderItem(sid) {
  const s = rh.sessions.get(sid);
  if (!s) return;
  let it = items.get(sid);
  if (!it) {
    const badge = h("span", { class: "badge", testid: "status-badge" });
    const title = h("span", { class: "session-title", testid: "session-title" });
    const progress = h("span", { class: "session-progress", testid: "session-progress" });
    const tokens = h("span", { testid: "token-count" });
    const ago = h("span", { class: "session-ago dim" });
    const presence = h("span", { class: "session-presence dim", testid: "session-presence" });
    const el = h(
      "li",
      { class: "session", testid: "session-item", "data-session-id": sid, tabindex: "0", role: "button" },
      h("div", { class: "session-row" }, title, badge),
      h("div", { class: "session-row sub" }, progress, h("span", { class: "session-tokens mono" }, tokens, " tok"), presence, ago),
    );
    el.addEventListener("click", () => focusSession(sid));
    el.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        focusSession(sid);
      } else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        let n = ev.key === "ArrowDown" ? el.nextElementSibling : el.previousElementSibling;
        while (n && n.hidden) n = ev.key === "ArrowDown" ? n.nextElementSibling : n.previousElementSibling;
        if (n) n.focus();
      }
    });
    it = { el, badge, title, progress, tokens, ago, presence, updatedAt: 0 };
    items.set(sid, it);
    els.list.append(el);
    orderDirty = true;
  }
  const status = s.status || "idle";
  it.updatedAt = s.updated_at || 0;
  it.el.dataset.status = status;
  it.el.classList.toggle("focused", sid === focused);
  it.el.classList.toggle("attention", status === "awaiting_approval" || status === "awaiting_clarify");
  setText(it.badge, statusLabel(s.status));
  it.badge.dataset.status = status;
  setText(it.title, s.title || `Untitled · ${shortId(sid)}`);
  it.title.title = s.title || sid;
  setText(it.progress, s.progress || (s.status ? "" : "no runs yet"));
  setText(it.tokens, String(s.tokens || 0));
  setText(it.ago, fmtAgo(s.updated_at));
  renderPresence(it.presence, s.presence);
  applyFilter(it, sid, s);
}

// renderPresence shows who else has a session open (protocol.md §4.2
// presence): "2 viewing" once more than this tab watches it, and the
// subjects whose tabs focus it.
function renderPresence(el, p) {
  const focusedBy = ((p && p.subjects) || []).filter((x) => x.focused > 0).map((x) => x.subject);
  const parts = [];
  if (p && p.watching > 1) parts.push(`${p.watching} viewing`);
  if (focusedBy.length) parts.push(`focused: ${focusedBy.join(", ")}`);
  setText(el, parts.join(" · "));
  el.title = p ? `${p.watching} tab(s) watching, ${p.focused} focusing` : "";
  el.hidden = !parts.length;
}

// renderTitle puts the sessions waiting on the user and the focused session
// in the tab title.
function renderTitle() {
  let waiting = 0;
  for (const s of rh.sessions.values()) if (s.status === "awaiting_approval" || s.status === "awaiting_clarify") waiting++;
  const s = focused && rh.sessions.get(focused);
  const name = focused ? (s && s.title) || "session" : "workbench";
  const t = `${waiting ? `(${waiting}) ` : ""}${name} · runhub`;
  if (document.title !== t) document.title = t;
}

function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function applyFilter(it, sid, s) {
  const q = els.filter.value.trim().toLowerCase();
  it.el.hidden = !!q && !`${s.title || ""} ${sid} ${s.status || ""}`.toLowerCase().includes(q);
}

function reorder() {
  orderDirty = false;
  const sorted = [...items.keys()].sort((a, b) => (items.get(b).updatedAt || 0) - (items.get(a).updatedAt || 0) || (a < b ? -1 : 1));
  let cur = els.list.firstElementChild;
  for (const sid of sorted) {
    const el = items.get(sid).el;
    if (cur === el) cur = cur.nextElementSibling;
    else els.list.insertBefore(el, cur);
  }
  els.count.textContent = String(items.size);
  els.emptyList.hidden = items.size > 0;
}

els.filter.addEventListener("input", () => {
  for (const [sid, it] of items) applyFilter(it, sid, rh.sessions.get(sid) || {});
});

setInterval(() => {
  for (const [sid, it] of items) {
    const s = rh.sessions.get(sid);
    if (s) setText(it.ago, fmtAgo(s.updated_at));
  }
}, 15000);

// ---- focus ---------------------------------------------------------------

function focusSession(sid, force = false) {
  sid = sid || null;
  if (sid === focused && !force) return;
  if (focused && items.has(focused)) items.get(focused).el.classList.remove("focused");
  const prev = focused && views.get(focused);
  if (prev) {
    // Come back to the same place, or to the end if the user was following it.
    const sc = els.scroll;
    prev.scrollTop = sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48 ? null : sc.scrollTop;
  }
  focused = sid;
  stopping = null;
  stickToBottom = true;
  els.jump.hidden = true;
  if (sid) {
    let v = views.get(sid);
    if (v) {
      views.delete(sid);
      views.set(sid, v);
      rh.focus(sid); // resume after the last event this tab saw
    } else {
      v = new SessionView(sid, viewCtx(sid));
      views.set(sid, v);
      // A full replay: of every run when the hub lists the session's runs
      // (a cursor before the first event of the first run), else of the
      // latest run.
      const runs = rh.sessions.get(sid) && rh.sessions.get(sid).runs;
      rh.focus(sid, { cursor: Array.isArray(runs) && runs.length > 1 ? `${runs[0]}:0` : null });
      evictViews();
    }
    els.transcript.replaceChildren(v.el);
    if (v.scrollTop != null) {
      els.scroll.scrollTop = v.scrollTop;
      stickToBottom = false;
    } else {
      els.scroll.scrollTop = els.scroll.scrollHeight;
    }
    if (items.has(sid)) items.get(sid).el.classList.add("focused");
  } else {
    rh.focus(null);
    els.transcript.replaceChildren();
  }
  els.startNew.checked = !sid;
  const hash = sid ? `#/s/${encodeURIComponent(sid)}` : "#/";
  if (location.hash !== hash) history.replaceState(null, "", hash);
  paneDirty = true;
  schedule();
}

function evictViews() {
  while (views.size > MAX_VIEWS) {
    const [sid] = views.keys();
    if (sid === focused) break;
    views.delete(sid);
    rh.forget(sid);
  }
}

function sessionFromHash() {
  const m = /^#\/s\/(.+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

window.addEventListener("hashchange", () => focusSession(sessionFromHash()));

// ---- the focused pane ----------------------------------------------------

function renderPane() {
  paneDirty = false;
  const s = focused ? rh.sessions.get(focused) : null;
  const controls = new Set((s && s.active_controls) || []);
  document.body.classList.toggle("has-focus", !!focused);
  els.emptyPane.hidden = !!focused;

  setText(els.title, focused ? (s && s.title) || `Session ${shortId(focused)}` : "New session");
  els.title.title = focused || "";
  const status = focused ? (s && s.status) || "idle" : "idle";
  setText(els.status, statusLabel(s && s.status));
  els.status.dataset.status = status;
  els.status.hidden = !focused;
  const progress = (s && s.progress) || "";
  setText(els.progress, progress === status || progress === statusLabel(status) ? "" : progress);
  setText(els.tokens, s && s.tokens ? `${fmtCount(s.tokens)} tokens` : "");
  setText(els.run, s && s.run_id ? shortId(s.run_id) : "");
  els.run.title = (s && s.run_id) || "";
  els.replaying.hidden = !(focused && rh.replaying);

  // Stop: only while the session lists cancel.
  const canCancel = !!focused && controls.has("cancel");
  els.stop.hidden = !canCancel;
  const isStopping = canCancel && s && stopping === s.run_id;
  els.stop.disabled = !!isStopping;
  setText(els.stop, isStopping ? "Stopping…" : "■ Stop");

  // Queue and goal: always there; they need a session.
  for (const el of [...els.queueForm.elements, ...els.goalForm.elements]) el.disabled = !focused;
  setText(els.queueDepth, String((s && s.queue_depth) || 0));
  els.queueDepth.parentElement.classList.toggle("nonzero", !!(s && s.queue_depth));
  const v = focused && views.get(focused);
  const q = v && v.queue;
  els.queueDepth.parentElement.title = q && q.items && q.items.length ? q.items.map((i) => `• ${i.preview || i.id}`).join("\n") : "messages waiting";
  const goal = (s && s.goal) || (v && v.goal);
  const gstate = (goal && goal.state) || "none";
  setText(els.goalState, gstate);
  els.goalState.dataset.state = gstate;
  setText(els.goalText, goal && goal.text && gstate !== "cleared" ? goal.text + (goal.turns ? ` · ${goal.turns} turns` : "") : "");
  for (const b of els.goalForm.querySelectorAll('[data-testid="goal-action"]')) {
    const a = b.dataset.action;
    const relevant = a === "set" || (a === "pause" && gstate === "active") || (a === "resume" && gstate === "paused") || (a === "clear" && (gstate === "active" || gstate === "paused"));
    b.classList.toggle("irrelevant", !relevant);
  }

  els.startSubmit.textContent = !focused || els.startNew.checked ? "Start in new session" : "Start run";
  renderTitle();
  els.startForm.classList.toggle("busy", !!(s && controls.has("cancel")));

  if (v) v.refreshControls(s);
}

els.jump.addEventListener("click", () => {
  els.scroll.scrollTop = els.scroll.scrollHeight;
  els.jump.hidden = true;
});
els.scroll.addEventListener("scroll", () => {
  const sc = els.scroll;
  if (sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48) els.jump.hidden = true;
});

els.stop.addEventListener("click", async () => {
  const s = focused && rh.sessions.get(focused);
  if (!s) return;
  stopping = s.run_id;
  paneDirty = true;
  schedule();
  const r = await control(rh.cancel(s.run_id ? { run_id: s.run_id } : { session_id: focused }), "stop");
  if (!r || !r.accepted) stopping = null;
  paneDirty = true;
  schedule();
});

// ---- forms ---------------------------------------------------------------

function intField(input) {
  const v = input.value.trim();
  if (v === "") return undefined;
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

function simOptions() {
  const f = els.sim;
  const sim = {
    tokens: intField(f.tokens),
    token_ms: intField(f.tokenMs),
    reasoning: intField(f.reasoning),
    tools: intField(f.tools),
    approval: f.approval.checked,
    clarify: f.clarify.checked,
  };
  if (f.fail.value) sim.fail = f.fail.value;
  for (const k of Object.keys(sim)) if (sim[k] === undefined) delete sim[k];
  return sim;
}

// Profiles: GET /v1/profiles names the runtime profiles (name and driver
// kind only). The picked one is remembered; the sim options show only for
// a sim profile. Without the list, starts name no profile (the hub's
// default).
const profileDrivers = new Map(); // name → driver kind

async function loadProfiles() {
  const token = localStorage.getItem("runhub.token");
  try {
    const resp = await fetch("/v1/profiles", { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!resp.ok) return;
    const { profiles = [] } = await resp.json();
    if (!profiles.length) return;
    const saved = localStorage.getItem("runhub.profile");
    let pick = profiles.find((p) => p.name === saved) || profiles.find((p) => p.default) || profiles[0];
    els.startProfile.replaceChildren();
    for (const p of profiles) {
      profileDrivers.set(p.name, p.driver);
      const label = p.driver === p.name ? p.name : `${p.name} · ${p.driver}`;
      els.startProfile.append(h("option", { value: p.name, text: p.default ? `${label} (default)` : label }));
    }
    els.startProfile.value = pick.name;
    profileChanged();
  } catch {
    // keep "default": the hub picks
  }
}

function selectedDriver() {
  const name = els.startProfile.value;
  return name ? profileDrivers.get(name) : "sim";
}

function profileChanged() {
  els.simOptions.hidden = selectedDriver() !== "sim";
}

els.startProfile.addEventListener("change", () => {
  if (els.startProfile.value) localStorage.setItem("runhub.profile", els.startProfile.value);
  profileChanged();
});

els.startNew.addEventListener("change", () => {
  paneDirty = true;
  schedule();
});

els.startForm.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const message = els.startMessage.value.trim();
  if (!message) {
    els.startMessage.focus();
    return;
  }
  const inNew = els.startNew.checked || !focused;
  const fields = { message };
  if (els.startProfile.value) fields.profile = els.startProfile.value;
  if (selectedDriver() === "sim") fields.metadata = { sim: simOptions() };
  if (!inNew) fields.session_id = focused;
  els.startSubmit.disabled = true;
  try {
    const r = await control(rh.start(fields), "start");
    if (r && r.accepted) {
      els.startMessage.value = "";
      if (r.session_id && r.session_id !== focused) focusSession(r.session_id);
      els.startNew.checked = false;
      stickToBottom = true;
      paneDirty = true;
      schedule();
    } else if (r && r.status === "conflict") {
      toast("A run is active in this session — queue the message instead, or start in a new session.", "info");
    }
  } finally {
    els.startSubmit.disabled = false;
  }
});

els.startMessage.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    els.startForm.requestSubmit();
  }
});

els.newSession.addEventListener("click", () => {
  focusSession(null);
  els.startNew.checked = true;
  els.startMessage.focus();
});

els.queueForm.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const message = els.queueInput.value.trim();
  if (!focused || !message) return;
  const r = await control(rh.queue({ session_id: focused, message, mode: els.queueMode.value }), "queue");
  if (r && r.accepted) {
    els.queueInput.value = "";
    toast(els.queueMode.value === "steer" ? "Steering message sent" : "Queued", "ok");
  }
});

async function goalAction(action) {
  if (!focused) return;
  const text = els.goalInput.value.trim();
  if (action === "set" && !text) {
    els.goalInput.focus();
    return;
  }
  const fields = { session_id: focused, action };
  if (text && (action === "set" || action === "edit")) fields.text = text;
  const r = await control(rh.goal(fields), `goal ${action}`);
  if (r && r.accepted && action === "set") els.goalInput.value = "";
}

els.goalForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  goalAction("set");
});
for (const b of els.goalForm.querySelectorAll('[data-testid="goal-action"]')) {
  if (b.dataset.action !== "set") b.addEventListener("click", () => goalAction(b.dataset.action));
}

// ---- toasts and theme ----------------------------------------------------

function toast(text, kind = "info") {
  const el = h("div", { class: `toast toast-${kind}`, testid: "toast", "data-kind": kind, role: "status", text });
  els.toasts.append(el);
  while (els.toasts.children.length > 4) els.toasts.firstElementChild.remove();
  setTimeout(() => {
    el.classList.add("leaving");
    setTimeout(() => el.remove(), 300);
  }, kind === "error" ? 7000 : 3500);
}

const THEMES = ["auto", "dark", "light"];
function applyTheme(t) {
  if (t === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  els.theme.title = `theme: ${t}`;
  els.theme.textContent = { auto: "◐", dark: "☾", light: "☀" }[t];
}
let theme = localStorage.getItem("runhub.theme") || "auto";
if (!THEMES.includes(theme)) theme = "auto";
applyTheme(theme);
els.theme.addEventListener("click", () => {
  theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  localStorage.setItem("runhub.theme", theme);
  applyTheme(theme);
});

// ---- start ---------------------------------------------------------------

loadProfiles();
rh.connect();
rh.watch({ all: true });
focusSession(sessionFromHash(), true);
