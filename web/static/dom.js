// dom.js — tiny DOM and formatting helpers shared by the workbench modules.
// Text always goes in through text nodes, never innerHTML: everything the hub
// sends is untrusted.

// h builds an element. props: class, text, testid, hidden, title, type,
// data-* and other attributes, and on<Event> handlers. Children may be
// strings, nodes, arrays of them, or null/false (skipped).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k === "testid") el.setAttribute("data-testid", v);
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "hidden") el.hidden = !!v;
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// statusLabel is the text of a status badge: the status with spaces, "idle"
// for a session without a run.
export function statusLabel(status) {
  return status ? String(status).replace(/_/g, " ") : "idle";
}

export function fmtDuration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  return `${m}m ${Math.round(s - m * 60)}s`;
}

export function fmtCount(n) {
  n = Number(n) || 0;
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

// One formatter for every clock: toLocaleTimeString with options makes a
// new one per call, which costs more than the rest of a run's rendering.
let clockFormat = null;

export function fmtClock(unixSeconds) {
  if (!unixSeconds) return "";
  clockFormat ||= new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return clockFormat.format(new Date(unixSeconds * 1000));
}

export function fmtAgo(unixSeconds, now = Date.now()) {
  if (!unixSeconds) return "";
  const s = Math.max(0, Math.round(now / 1000 - unixSeconds));
  if (s < 5) return "now";
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// shortId keeps the tail of an id, which is where ULIDs differ.
export function shortId(id) {
  if (!id) return "";
  return id.length > 14 ? `${id.slice(0, 2)}…${id.slice(-8)}` : id;
}

// pretty renders a JSON value for a <pre>: strings as they are, the rest
// indented.
export function pretty(v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// oneLine renders a JSON value on one line, cut to max characters.
export function oneLine(v, max = 90) {
  let s;
  if (v === undefined || v === null) return "";
  if (typeof v === "string") s = v;
  else {
    try {
      s = JSON.stringify(v);
    } catch {
      s = String(v);
    }
  }
  s = s.replace(/\s+/g, " ");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
