// app.js — the runhub workbench: the session list (status of every session,
// watch {all:true}) and the focused pane (the transcript of one session,
// focus with a resume cursor), wired to one RunhubClient.
//
// Rendering is batched: client callbacks only record what changed, and one
// animation frame applies it (a background tab, which gets no frames, falls
// back to a timer).

import { RunhubClient } from "./runhub-client.js";
import { SessionView } from "./transcript.js";
import { CatchUp } from "./catchup.js";
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
  tools: $("pane-tools"),
  rename: $("rename-session"),
  renameForm: $("rename-form"),
  renameInput: $("rename-input"),
  renameCancel: $("rename-cancel"),
  del: $("delete-session"),
  delConfirm: $("delete-confirm"),
  delYes: $("delete-yes"),
  delNo: $("delete-no"),
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
  queueToggle: $("queue-toggle"),
  queuePanel: $("queue-panel"),
  queueItems: $("queue-items"),
  queueNote: $("queue-note"),
  queueClear: $("queue-clear"),
  queueClose: $("queue-close"),
  stopClear: $("stop-clear"),
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
    markdown: $("sim-markdown"),
    fail: $("sim-fail"),
  },
  toasts: $("toasts"),
  sidebar: document.querySelector(".sidebar"),
  sessionsToggle: $("sessions-toggle"),
  offline: $("offline-banner"),
  offlineText: $("offline-text"),
  retryNow: $("retry-now"),
  paneOffline: $("pane-offline"),
  needsTop: $("needs-top"),
  needsTopCount: $("needs-top-count"),
  needsList: $("needs-list"),
  notify: $("notify-toggle"),
  newPill: $("new-pill"),
  renameSave: document.querySelector('[data-testid="rename-save"]'),
};
// Group headings of the session list.
els.needsCount = h("span", { class: "count", testid: "needs-count" }, "0");
els.needsHead = h("li", { class: "group-head needs", testid: "group-needs-you", role: "presentation", hidden: true }, "Needs you ", els.needsCount);
els.restHead = h("li", { class: "group-head", testid: "group-rest", role: "presentation", hidden: true }, "Other sessions");
els.list.append(els.needsHead, els.restHead);

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
// endState is where the transcript was when last measured (after each
// render and scroll): at its end or not, and the height of its area. When
// that height changes (the queue panel opens, the dock grows), the
// distance to the end grows without the user scrolling: one who was at
// the end is still following the stream.
const endState = { atEnd: true, height: 0 };

// progressOf is what a session's status says the run is doing: its
// progress, or "waiting for a runner" while its queued run waits for a
// runner process none is taking (waiting: "runner", docs/protocol.md).
function progressOf(s) {
  if (!s) return "";
  if (s.waiting === "runner") return "waiting for a runner";
  return s.progress || "";
}

function measureEnd() {
  const sc = els.scroll;
  endState.atEnd = sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48;
  endState.height = sc.clientHeight;
}

const viewCtx = (sid) => ({
  status: () => rh.sessions.get(sid),
  approve: async (run, card, choice) => {
    await control(rh.approve({ run_id: run.id, approval_id: card.id, choice }), "approve");
  },
  clarify: async (run, card, response) => {
    await control(rh.clarify({ run_id: run.id, clarify_id: card.id, response }), "clarify");
  },
  fetchJSON: api,
  caughtUp: () => catchUp.done(sid),
  loadOlder: (v) => pageHistory(v, true),
  keepScroll: (v, fn) => {
    const sc = els.scroll;
    if (v.sessionId !== focused) return fn();
    const fromBottom = sc.scrollHeight - sc.scrollTop;
    fn();
    sc.scrollTop = sc.scrollHeight - fromBottom;
  },
});

// api calls the hub's HTTP API with the page's token and returns the JSON
// body; an error answer throws with the hub's message, status and code.
async function api(path, init = {}) {
  const token = currentToken();
  const headers = { ...(init.headers || {}) };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (init.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { ...init, headers });
  const text = await resp.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!resp.ok) {
    const err = new Error((body && body.error && body.error.message) || `HTTP ${resp.status}`);
    err.status = resp.status;
    err.code = body && body.error && body.error.code;
    throw err;
  }
  return body;
}

// control awaits a control's result and reports anything but accepted
// (one toast per action at most); explain maps a refused result to the
// text to show instead of the hub's.
async function control(promise, what, explain) {
  try {
    const r = await promise;
    if (!r.accepted) toast((explain && explain(r)) || `${what}: ${r.status}${r.message ? ` — ${r.message}` : ""}`, "warn");
    return r;
  } catch (err) {
    if (err.code === "client_disconnected" && !online) toast(`${what} was not sent: offline (not connected to the hub). Try again once it reconnects.`, "error");
    else toast(`${what}: ${err.message}`, "error");
    return null;
  }
}

// ---- catch-up -------------------------------------------------------------

// The focused session's catch-up (catchup.js): the history read waits for
// it, and the transcript's text is held back while it arrives.
const catchUp = new CatchUp({ onHoldEnd: () => schedule() });

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
  const resized = sc.clientHeight !== endState.height;
  const atBottom = sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48 || (resized && endState.atEnd);
  let grew = false;
  for (const v of views.values()) if (v.flush(rh.replaying && catchUp.hold(v.sessionId))) grew = grew || v.sessionId === focused;
  // Text that arrived before the socket went down but is rendered after
  // brings no caret back: nothing streams while offline.
  if (!online) for (const v of views.values()) v.stopCarets();
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
  } else if (resized && endState.atEnd) {
    sc.scrollTop = sc.scrollHeight;
  }
  measureEnd();
}

// ---- connection ----------------------------------------------------------

// Offline: while the socket is not welcomed nothing can be sent. The pane
// says so, the controls that send are disabled with the reason, no caret
// pretends text is streaming, and an action attempted anyway is refused by
// the client (never queued to happen later).
const OFFLINE_REASON = "Offline: not connected to the hub, so nothing can be sent";
let online = false;
let offlineDelay = 0;

function renderOffline() {
  const st = rh.state;
  const down = st === "reconnecting" || st === "closed" || st === "unauthorized";
  document.body.classList.toggle("offline", !online);
  els.offline.hidden = !down;
  if (down) {
    const when = st === "reconnecting" ? (offlineDelay ? `reconnecting in ${Math.max(1, Math.round(offlineDelay / 1000))} s` : "reconnecting…") : st === "unauthorized" ? "the hub refused the token" : "not reconnecting";
    setText(els.offlineText, `Offline — the connection to the hub is down (${when}). Stop, Start and every other action are disabled until it is back; what is shown may be out of date.`);
  }
  if (!online) for (const v of views.values()) v.stopCarets();
}

rh.on("state", ({ state, delay_ms: delay }) => {
  online = state === "open";
  offlineDelay = delay || 0;
  renderOffline();
  // At once, not on the next frame: a control must not be clickable for a
  // moment after the connection is gone.
  renderPane();
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
// Back online or back in view: try at once instead of waiting out the
// backoff. The banner's "Retry now" does the same.
window.addEventListener("online", () => rh.retryNow());
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) rh.retryNow();
});
els.retryNow.addEventListener("click", () => rh.retryNow());

let welcomes = 0;
rh.on("open", (w) => {
  // After a reconnect the hub may have restarted with other settings:
  // re-read what the page caches (the profiles; statuses and the focus
  // come again on the socket).
  if (welcomes++ > 0) {
    loadProfiles();
    const v = focused && views.get(focused);
    if (v && v.history.error) pageHistory(v, true);
  }
  els.conn.title = `connected to ${w.hub_id || "hub"} as ${w.subject || "?"}`;
  paneDirty = true;
  schedule();
});
rh.on("status", (s) => {
  if (s.deleted) {
    seen.delete(s.session_id);
    return removeSession(s.session_id);
  }
  // The list moves only when a session arrives or changes group (needs
  // you / the rest), never on its tokens.
  const prev = items.get(s.session_id);
  if (!prev || prev.group !== groupOf(s)) orderDirty = true;
  noticeChange(s);
  if (s.session_id === focused && queueOpen() && (s.queue_depth || 0) !== queue.items.length) loadQueue();
  dirtyItems.add(s.session_id);
  if (s.session_id === focused) paneDirty = true;
  schedule();
});
rh.on("event", (e) => {
  if (e.type === "queue.updated" && e.session_id === focused && queueOpen()) loadQueue();
  const v = views.get(e.session_id);
  if (!v) return;
  v.push(e);
  schedule();
});
rh.on("replayed", (m) => {
  if (m.session_id !== focused) return;
  catchUp.end(m.session_id);
  stickToBottom = true;
  paneDirty = true;
  // The catch-up is in: render it now rather than on the next frame's
  // callback, so that frame can already show it.
  render();
});
rh.on("reset", ({ session_id: sid }) => {
  const v = views.get(sid);
  if (v) {
    v.clear();
    pageHistory(v, true);
  }
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
    el.addEventListener("click", () => {
      focusSession(sid);
      // On a narrow screen the list gives its room to the session.
      if (narrow.matches) setListCollapsed(true);
    });
    el.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        focusSession(sid);
      } else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        let n = ev.key === "ArrowDown" ? el.nextElementSibling : el.previousElementSibling;
        while (n && (n.hidden || !n.classList.contains("session"))) n = ev.key === "ArrowDown" ? n.nextElementSibling : n.previousElementSibling;
        if (n) n.focus();
      }
    });
    it = { el, badge, title, progress, tokens, ago, presence, group: "", createdAt: 0, placed: false };
    items.set(sid, it);
    orderDirty = true;
  }
  const status = s.status || "idle";
  if (it.group !== groupOf(s)) orderDirty = true;
  it.group = groupOf(s);
  it.createdAt = s.created_at || it.createdAt || 0;
  it.el.dataset.group = it.group;
  it.el.dataset.status = status;
  it.el.classList.toggle("focused", sid === focused);
  it.el.classList.toggle("attention", status === "awaiting_approval" || status === "awaiting_clarify");
  setText(it.badge, statusLabel(s.status));
  it.badge.dataset.status = status;
  setText(it.title, s.title || `Untitled · ${shortId(sid)}`);
  it.title.title = s.title || sid;
  setText(it.progress, progressOf(s) || (s.status ? "" : "no runs yet"));
  setText(it.tokens, String(s.tokens || 0));
  setText(it.ago, fmtAgo(s.updated_at));
  renderPresence(it.presence, s.presence);
  applyFilter(it, sid, s);
}

// renderPresence shows who else has a session open (protocol.md §4.2
// presence), compactly: an eye icon and the number of tabs viewing it, once
// more than this tab does; the tooltip says who focuses it.
function renderPresence(el, p) {
  const focusedBy = ((p && p.subjects) || []).filter((x) => x.focused > 0).map((x) => x.subject);
  const watching = (p && p.watching) || 0;
  if (!el.firstChild) el.append(h("span", { class: "icon-mask icon-eye", "aria-hidden": "true" }), document.createTextNode(""));
  el.lastChild.data = watching > 1 ? String(watching) : "";
  el.dataset.watching = String(watching);
  el.title = p ? [`${watching} tab${watching === 1 ? "" : "s"} viewing`, focusedBy.length ? `focused: ${focusedBy.join(", ")}` : ""].filter(Boolean).join(" · ") : "";
  el.setAttribute("aria-label", el.title);
  el.hidden = watching <= 1;
}

// renderTitle puts the sessions waiting on the user and the focused session
// in the tab title.
function renderTitle() {
  let waiting = 0;
  for (const s of rh.sessions.values()) if (groupOf(s) === "needs") waiting++;
  renderNeeds(waiting);
  const s = focused && rh.sessions.get(focused);
  const name = focused ? (s && s.title) || "session" : "workbench";
  const t = `${waiting ? `(${waiting}) ` : ""}${name} · runhub`;
  if (document.title !== t) document.title = t;
}

// ---- needs you: badges and desktop notifications ----------------------

// renderNeeds shows how many sessions wait on the user in the top bar and
// on the list's header (which stays visible when the list is folded).
function renderNeeds(n) {
  for (const [el, count] of [
    [els.needsTop, els.needsTopCount],
    [els.needsList, els.needsList],
  ]) {
    el.hidden = n === 0;
    setText(count, String(n));
  }
  els.needsTop.title = `${n} session${n === 1 ? "" : "s"} waiting for your answer`;
  els.needsList.title = els.needsTop.title;
}

els.needsTop.addEventListener("click", () => {
  // Go to the oldest session that waits.
  const waiting = [...rh.sessions.values()].filter((s) => groupOf(s) === "needs").sort((a, b) => (a.updated_at || 0) - (b.updated_at || 0));
  if (!waiting.length) return;
  focusSession(waiting[0].session_id);
  if (narrow.matches) setListCollapsed(true);
});

// Notifications are opt-in (the bell in the top bar) and only shown while
// the tab is hidden: a session starts needing the user, or a run ends.
const TERMINAL = new Set(["completed", "failed", "cancelled", "interrupted", "expired"]);
const seen = new Map(); // session_id → { group, status, run } last status seen
let notifyOn = localStorage.getItem("runhub.notify") === "1";

function renderNotify() {
  const N = window.Notification;
  const perm = N ? N.permission : "unsupported";
  const on = notifyOn && perm === "granted";
  els.notify.dataset.on = String(on);
  els.notify.title = !N ? "This browser has no desktop notifications" : perm === "denied" ? "Notifications are blocked for this page (browser settings)" : on ? "Desktop notifications on (when this tab is hidden): click to turn off" : "Turn on desktop notifications for prompts and finished runs while this tab is hidden";
  els.notify.disabled = !N || perm === "denied";
}

els.notify.addEventListener("click", async () => {
  const N = window.Notification;
  if (!N) return;
  if (notifyOn && N.permission === "granted") {
    notifyOn = false;
  } else {
    const perm = N.permission === "granted" ? "granted" : await N.requestPermission();
    notifyOn = perm === "granted";
  }
  localStorage.setItem("runhub.notify", notifyOn ? "1" : "0");
  renderNotify();
});

function notify(s, text) {
  const N = window.Notification;
  if (!notifyOn || !N || N.permission !== "granted" || !document.hidden) return;
  try {
    const n = new N(s.title || `Session ${shortId(s.session_id)}`, { body: text, tag: `runhub-${s.session_id}` });
    n.onclick = () => {
      window.focus();
      focusSession(s.session_id);
      n.close();
    };
  } catch (err) {
    console.warn("runhub: notification", err);
  }
}

// noticeChange notifies on a session that starts needing the user or whose
// run ends; the first status of a session is only remembered.
function noticeChange(s) {
  const prev = seen.get(s.session_id);
  const now = { group: groupOf(s), status: s.status || "", run: s.run_id || "" };
  seen.set(s.session_id, now);
  if (!prev) return;
  if (now.group === "needs" && prev.group !== "needs") {
    notify(s, s.pending_approval ? `Needs your approval: ${s.pending_approval.summary || ""}` : s.pending_clarify ? `Asks: ${s.pending_clarify.question || ""}` : "Needs you");
  } else if (TERMINAL.has(now.status) && (!TERMINAL.has(prev.status) || prev.run !== now.run)) {
    notify(s, `Run ${statusLabel(now.status)}`);
  }
}

// ---- rows never move under the pointer ---------------------------------

let pointerInList = false;
els.list.addEventListener("pointerenter", () => {
  pointerInList = true;
});
els.list.addEventListener("pointerleave", () => {
  pointerInList = false;
  if (orderDirty) {
    reorder();
    schedule();
  }
});
els.newPill.addEventListener("click", () => {
  pointerInList = false;
  reorder();
  els.list.scrollTop = 0;
});

// renderNewPill shows how many new sessions wait to be placed.
function renderNewPill() {
  let n = 0;
  for (const it of items.values()) if (!it.placed) n++;
  els.newPill.hidden = n === 0;
  setText(els.newPill, `↑ ${n} new`);
}

function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

function applyFilter(it, sid, s) {
  const q = els.filter.value.trim().toLowerCase();
  it.el.hidden = !!q && !`${s.title || ""} ${sid} ${s.status || ""}`.toLowerCase().includes(q);
}

// groupOf puts a session waiting on the user (an approval or a question)
// in "needs you", pinned at the top; every other session is in "rest".
function groupOf(s) {
  return s && (s.pending_approval || s.pending_clarify || s.status === "awaiting_approval" || s.status === "awaiting_clarify") ? "needs" : "rest";
}

// The list is ordered by group, then newest created first: a row moves
// only when its session changes group, never because it streams.
function reorder() {
  // Rows never move under the pointer: while it is over the list, new
  // sessions wait behind the "N new" pill and rows keep their places.
  if (pointerInList) {
    renderNewPill();
    return;
  }
  orderDirty = false;
  for (const it of items.values()) it.placed = true;
  renderNewPill();
  const byCreation = (a, b) => {
    const x = items.get(a);
    const y = items.get(b);
    return (y.createdAt || 0) - (x.createdAt || 0) || (a < b ? 1 : -1);
  };
  const needs = [...items.keys()].filter((sid) => items.get(sid).group === "needs").sort(byCreation);
  const rest = [...items.keys()].filter((sid) => items.get(sid).group !== "needs").sort(byCreation);
  const order = [els.needsHead, ...needs.map((sid) => items.get(sid).el), els.restHead, ...rest.map((sid) => items.get(sid).el)];
  let cur = els.list.firstElementChild;
  for (const el of order) {
    if (cur === el) cur = cur.nextElementSibling;
    else els.list.insertBefore(el, cur);
  }
  els.needsHead.hidden = needs.length === 0;
  els.needsCount.textContent = String(needs.length);
  for (const [sid, it] of items) it.el.dataset.placedGroup = it.group;
  els.restHead.hidden = needs.length === 0 || rest.length === 0;
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

// The session list folds away (on narrow screens, where it shares the
// column with the pane); the choice is remembered.
const narrow = window.matchMedia("(max-width: 620px)");
function setListCollapsed(on, remember = true) {
  els.sidebar.classList.toggle("collapsed", on);
  els.sessionsToggle.setAttribute("aria-expanded", String(!on));
  if (remember) localStorage.setItem("runhub.listCollapsed", on ? "1" : "0");
}
els.sessionsToggle.addEventListener("click", () => {
  if (narrow.matches) setListCollapsed(!els.sidebar.classList.contains("collapsed"));
});
// A narrow page opened on a session gives the session the room.
setListCollapsed(localStorage.getItem("runhub.listCollapsed") === "1" || (narrow.matches && !!sessionFromHash()), false);

// removeSession takes a deleted session out of the list and the pane.
function removeSession(sid) {
  const it = items.get(sid);
  if (it) {
    it.el.remove();
    items.delete(sid);
  }
  dirtyItems.delete(sid);
  views.delete(sid);
  if (focused === sid) focusSession(null);
  orderDirty = true;
  schedule();
}

// ---- focus ---------------------------------------------------------------

function focusSession(sid, force = false) {
  sid = sid || null;
  if (sid === focused && !force) return;
  // Ask the hub first: what the page does below overlaps its catch-up.
  // A session with a view resumes after the last event this tab saw; a
  // new one replays its latest run and streams what follows (the earlier
  // runs come over HTTP, a page at a time, more on scroll-up).
  if (!sid) rh.focus(null);
  else if (views.has(sid)) rh.focus(sid);
  else rh.focus(sid, { cursor: null });
  catchUp.start(sid);
  if (focused && items.has(focused)) items.get(focused).el.classList.remove("focused");
  const prev = focused && views.get(focused);
  if (prev) {
    // Come back to the same place, or to the end if the user was following it.
    const sc = els.scroll;
    prev.scrollTop = sc.scrollHeight - sc.scrollTop - sc.clientHeight < 48 ? null : sc.scrollTop;
  }
  focused = sid;
  stopping = null;
  setQueueOpen(false);
  els.renameForm.hidden = true;
  els.delConfirm.hidden = true;
  stickToBottom = true;
  els.jump.hidden = true;
  if (sid) {
    let v = views.get(sid);
    if (v) {
      views.delete(sid);
      views.set(sid, v);
    } else {
      v = new SessionView(sid, viewCtx(sid));
      views.set(sid, v);
      pageHistory(v, true);
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
  els.tools.hidden = !focused || !els.renameForm.hidden || !els.delConfirm.hidden;
  els.title.hidden = !els.renameForm.hidden;
  els.title.title = focused || "";
  const status = focused ? (s && s.status) || "idle" : "idle";
  setText(els.status, statusLabel(s && s.status));
  els.status.dataset.status = status;
  els.status.hidden = !focused;
  const progress = progressOf(s);
  setText(els.progress, progress === status || progress === statusLabel(status) ? "" : progress);
  setText(els.tokens, s && s.tokens ? `${fmtCount(s.tokens)} tokens` : "");
  setText(els.run, s && s.run_id ? shortId(s.run_id) : "");
  els.run.title = (s && s.run_id) || "";
  // Offline, nothing is replaying: the header says offline instead.
  els.replaying.hidden = !(focused && rh.replaying && online);
  els.paneOffline.hidden = online;
  for (const b of [els.rename, els.del, els.newSession, els.renameSave, els.delYes]) {
    b.disabled = !online;
    b.title = online ? b.dataset.title || "" : OFFLINE_REASON;
  }

  // Stop: only while the session lists cancel.
  const canCancel = !!focused && controls.has("cancel");
  els.stop.hidden = !canCancel;
  const isStopping = canCancel && s && stopping === s.run_id;
  els.stop.disabled = !!isStopping || !online;
  els.stop.title = online ? "Stop the run" : OFFLINE_REASON;
  setText(els.stop, isStopping ? "Stopping…" : "■ Stop");

  // Queue and goal: always there; they need a session, and a connection to
  // send (typing stays possible offline).
  for (const el of [...els.queueForm.elements, ...els.goalForm.elements]) {
    const sends = el.tagName === "BUTTON";
    el.disabled = !focused || (sends && !online);
    if (sends) el.title = online ? "" : OFFLINE_REASON;
  }
  els.startSubmit.disabled = !online;
  els.startSubmit.title = online ? "" : OFFLINE_REASON;

  setText(els.queueDepth, String((s && s.queue_depth) || 0));
  els.queueDepth.parentElement.classList.toggle("nonzero", !!(s && s.queue_depth));
  const v = focused && views.get(focused);
  const q = v && v.queue;
  els.queueDepth.parentElement.title = q && q.items && q.items.length ? q.items.map((i) => `• ${i.preview || i.id}`).join("\n") : "messages waiting: show, edit, reorder or remove them";
  els.queueToggle.disabled = !focused;
  const depth = (s && s.queue_depth) || 0;
  els.stopClear.hidden = !canCancel || depth === 0;
  els.stopClear.disabled = !online || !!isStopping;
  els.stopClear.title = online ? "Stop the run and remove every queued message, so nothing starts after it" : OFFLINE_REASON;
  renderQueue();
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
  measureEnd();
  if (endState.atEnd) els.jump.hidden = true;
  // Near the top: page the session's earlier runs in.
  const v = focused && views.get(focused);
  if (v && sc.scrollTop < 300) pageHistory(v, false);
});

// The transcript's area shrinks when the dock grows (the queue panel
// opens): a user who was at the end stays at it.
new ResizeObserver(() => {
  if (endState.atEnd && focused && els.scroll.clientHeight !== endState.height) els.scroll.scrollTop = els.scroll.scrollHeight;
  measureEnd();
}).observe(els.scroll);

// pageHistory loads the next page of a session's earlier runs (the first
// page, or on request, always; later ones while the user is near the top),
// and goes on while the transcript is too short to scroll.
function pageHistory(v, always) {
  const hist = v.history;
  if (hist.loading || !hist.more || (!always && (!hist.loaded || hist.error))) return;
  v.loadOlder().then(() => {
    schedule();
    const sc = els.scroll;
    if (v.sessionId === focused && !v.history.error && sc.scrollHeight - sc.clientHeight < 300) pageHistory(v, false);
  });
}

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

// ---- the queue panel -------------------------------------------------------

// The focused session's queued messages (GET /v1/sessions/{sid}/queue),
// with edit, move up/down, remove, clear, and "Stop & clear queue" in the
// pane's header. Every change sends an Idempotency-Key.
const queue = { sid: null, items: [], loading: false, error: "", editing: null };

const queueOpen = () => !els.queuePanel.hidden;

function setQueueOpen(on) {
  els.queuePanel.hidden = !on;
  els.queueToggle.setAttribute("aria-expanded", String(on));
  queue.editing = null;
  if (on) loadQueue();
}

els.queueToggle.addEventListener("click", () => setQueueOpen(!queueOpen()));
els.queueClose.addEventListener("click", () => setQueueOpen(false));

function queuePath(sid, rest = "") {
  return `/v1/sessions/${encodeURIComponent(sid)}/queue${rest}`;
}

const newKey = () => `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

async function loadQueue() {
  const sid = focused;
  if (!sid) return;
  queue.loading = true;
  try {
    const st = await api(queuePath(sid));
    if (sid !== focused) return;
    queue.sid = sid;
    queue.items = st.items || [];
    queue.error = "";
  } catch (err) {
    if (sid === focused) queue.error = err.message;
  } finally {
    queue.loading = false;
    paneDirty = true;
    schedule();
  }
}

// queueChange sends one change; the answer is the queue as it now is.
async function queueChange(what, method, rest, body) {
  const sid = focused;
  if (!sid) return null;
  try {
    const init = { method, headers: { "Idempotency-Key": newKey() } };
    if (body !== undefined) init.body = JSON.stringify(body);
    const st = await api(queuePath(sid, rest), init);
    if (sid === focused) {
      queue.sid = sid;
      queue.items = st.items || [];
      queue.error = "";
    }
    return st;
  } catch (err) {
    toast(err.code === "conflict" || err.code === "not_found" ? `${what}: the queue changed meanwhile — it is shown as it is now` : `${what}: ${err.message}`, err.code === "conflict" || err.code === "not_found" ? "warn" : "error");
    loadQueue();
    return null;
  } finally {
    queue.editing = null;
    paneDirty = true;
    schedule();
  }
}

function moveQueued(i, by) {
  const ids = queue.items.map((q) => q.id);
  const j = i + by;
  if (j < 0 || j >= ids.length) return;
  [ids[i], ids[j]] = [ids[j], ids[i]];
  queueChange("reorder", "PUT", "", { ids });
}

let queueDrawn = "";

function renderQueue() {
  if (!queueOpen()) {
    queueDrawn = "";
    return;
  }
  const items = queue.sid === focused ? queue.items : [];
  // Redraw only on a change: a row replaced under the pointer loses a click.
  const sig = JSON.stringify([focused, items, queue.editing, queue.error, queue.loading && !items.length, online]);
  if (sig === queueDrawn) return;
  queueDrawn = sig;
  const rows = items.map((q, i) => {
    const li = h("li", { class: "queue-item", testid: "queue-item", "data-qid": q.id });
    if (queue.editing === q.id) {
      const input = h("input", { type: "text", value: q.message, testid: "queue-edit-input", "aria-label": "queued message" });
      const save = h("button", { type: "button", class: "btn btn-small", testid: "queue-edit-save", text: "Save", disabled: !online, title: online ? "" : OFFLINE_REASON });
      const cancel = h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "queue-edit-cancel", text: "Cancel" });
      const submit = () => {
        const text = input.value.trim();
        if (text) queueChange("edit", "PATCH", `/${encodeURIComponent(q.id)}`, { message: text });
      };
      save.addEventListener("click", submit);
      cancel.addEventListener("click", () => {
        queue.editing = null;
        paneDirty = true;
        schedule();
      });
      input.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") submit();
        else if (ev.key === "Escape") cancel.click();
      });
      li.append(input, save, cancel);
      queueMicrotask(() => input.isConnected && document.activeElement !== input && input.focus());
      return li;
    }
    const btn = (testid, text, label, fn, off) => {
      const b = h("button", { type: "button", class: "icon-btn small", testid, text, "aria-label": label, title: online ? label : OFFLINE_REASON, disabled: !online || !!off });
      b.addEventListener("click", fn);
      return b;
    };
    li.append(
      h("span", { class: "queue-item-text", testid: "queue-item-text", title: q.message, text: q.message }),
      btn("queue-up", "↑", "Move up", () => moveQueued(i, -1), i === 0),
      btn("queue-down", "↓", "Move down", () => moveQueued(i, 1), i === items.length - 1),
      btn("queue-edit", "✎", "Edit", () => {
        queue.editing = q.id;
        paneDirty = true;
        schedule();
      }),
      btn("queue-remove", "✕", "Remove", () => queueChange("remove", "DELETE", `/${encodeURIComponent(q.id)}`)),
    );
    return li;
  });
  els.queueItems.replaceChildren(...rows);
  els.queueNote.hidden = rows.length > 0 && !queue.error;
  setText(els.queueNote, queue.error ? `The queue could not be read: ${queue.error}` : queue.loading && !rows.length ? "loading…" : "Nothing queued.");
  els.queueClear.disabled = !online || !rows.length;
  els.queueClear.title = online ? "Remove every queued message" : OFFLINE_REASON;
}

els.queueClear.addEventListener("click", () => queueChange("clear queue", "DELETE", ""));
els.stopClear.addEventListener("click", async () => {
  const s = focused && rh.sessions.get(focused);
  if (!s) return;
  stopping = s.run_id;
  paneDirty = true;
  schedule();
  const st = await queueChange("stop & clear queue", "DELETE", "?stop=true");
  if (!st || (st.stop && !st.stop.accepted)) {
    if (st && st.stop) toast(`stop: ${st.stop.status}${st.stop.message ? ` — ${st.stop.message}` : ""}`, "warn");
    stopping = null;
  }
  paneDirty = true;
  schedule();
});

// ---- rename and delete ---------------------------------------------------

function closePaneForms() {
  els.renameForm.hidden = true;
  els.delConfirm.hidden = true;
  paneDirty = true;
  schedule();
}

els.rename.addEventListener("click", () => {
  if (!focused) return;
  const s = rh.sessions.get(focused);
  els.renameInput.value = (s && s.title) || "";
  els.delConfirm.hidden = true;
  els.renameForm.hidden = false;
  paneDirty = true;
  render();
  els.renameInput.focus();
  els.renameInput.select();
});
els.renameCancel.addEventListener("click", closePaneForms);
els.renameInput.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape") closePaneForms();
});
els.renameForm.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const sid = focused;
  const title = els.renameInput.value.trim();
  if (!sid || !title) return els.renameInput.focus();
  try {
    const st = await api(`/v1/sessions/${encodeURIComponent(sid)}`, { method: "PATCH", body: JSON.stringify({ title }) });
    // Show it at once; the status feed brings the same to every tab.
    const cur = rh.sessions.get(sid);
    if (cur && st && st.title) cur.title = st.title;
    dirtyItems.add(sid);
    closePaneForms();
  } catch (err) {
    toast(`rename: ${err.message}`, "error");
  }
});

els.del.addEventListener("click", () => {
  if (!focused) return;
  els.renameForm.hidden = true;
  els.delConfirm.hidden = false;
  paneDirty = true;
  render();
  els.delNo.focus();
});
els.delNo.addEventListener("click", closePaneForms);
els.delYes.addEventListener("click", async () => {
  const sid = focused;
  if (!sid) return;
  els.delYes.disabled = true;
  try {
    await api(`/v1/sessions/${encodeURIComponent(sid)}`, { method: "DELETE" });
    closePaneForms();
    removeSession(sid); // the status feed tells the other tabs
  } catch (err) {
    closePaneForms();
    toast(err.code === "conflict" ? "This session has an active run: stop it first, then delete the session." : `delete: ${err.message}`, "error");
  } finally {
    els.delYes.disabled = false;
  }
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
  if (f.markdown.checked) sim.markdown = true;
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
    const r = await control(rh.start(fields), "start", (res) =>
      res.status === "conflict" ? "A run is active in this session — queue the message instead, or start in a new session." : "",
    );
    if (r && r.accepted) {
      els.startMessage.value = "";
      if (r.session_id && r.session_id !== focused) focusSession(r.session_id);
      els.startNew.checked = false;
      stickToBottom = true;
      paneDirty = true;
      schedule();
    }
  } finally {
    els.startSubmit.disabled = !online;
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
    // A steer shows in the transcript as the user's entry; a queued message
    // in the queue count.
    if (els.queueMode.value !== "steer") toast("Queued", "ok");
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

// toast shows one notice in the top bar's slot, replacing any earlier one
// (the newest is what the user just did). Errors stay longer.
function toast(text, kind = "info") {
  const el = h("div", { class: `toast toast-${kind}`, testid: "toast", "data-kind": kind, role: "status", title: text, text });
  els.toasts.replaceChildren(el);
  setTimeout(() => {
    el.classList.add("leaving");
    setTimeout(() => el.remove(), 300);
  }, kind === "error" ? 7000 : 4000);
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

for (const b of [els.rename, els.del, els.newSession, els.renameSave, els.delYes]) b.dataset.title = b.title;
renderNotify();
loadProfiles();
rh.connect();
rh.watch({ all: true });
focusSession(sessionFromHash(), true);
