// runhub-client.js — the browser client of runhub protocol v1.
//
// One WebSocket per tab to /v1/ws (subprotocol "runhub.v1"). No DOM code: it
// runs wherever a WebSocket constructor exists (pass one in options.WebSocket
// outside a browser).
//
//   import { RunhubClient } from "./runhub-client.js";
//   const rh = new RunhubClient({ token: "…" });   // options below
//   rh.on("status", (s) => …);     // a SessionStatus of a watched session
//   rh.on("event", (e) => …);      // an envelope of the focused session
//   rh.connect();
//   rh.watch({ all: true });
//   rh.focus("s_123");             // replay, then `replayed`, then live
//   const res = await rh.start({ message: "hi", metadata: { sim: { tokens: 5 } } });
//
// Options (all optional):
//   url              WebSocket URL; default ws(s)://<location.host>/v1/ws
//   token            bearer token sent in hello (setToken changes it)
//   getToken         () => token | Promise<token>: called before every hello
//                    and, for a JWT with exp, renewBeforeMs before it
//                    expires, to renew the open socket's credentials with a
//                    fresh hello (the hub closes it 4401 at expiry otherwise)
//   renewBeforeMs    how long before exp to renew (60000; at the latest
//                    halfway through what is left of a short-lived token)
//   client           client name sent in hello; default "runhub-web/1"
//   WebSocket        WebSocket constructor; default globalThis.WebSocket
//   controlTimeoutMs how long a control or ping waits for its answer (15000)
//   helloTimeoutMs   how long to wait for welcome before retrying (10000)
//   pingIntervalMs   liveness ping period; default welcome.limits
//                    .ping_interval_ms or 25000; 0 disables
//   backoff          { initialMs: 250, maxMs: 5000, factor: 2, jitter: 0.5 }
//   compact          ask for compacted catch-up (hello capability
//                    "compact_replay", protocol.md §5.6): a replayed run of
//                    deltas of one message comes as one event carrying
//                    seq_from..seq (true)
//   resyncOnGap      re-focus from the last contiguous seq when a seq gap is
//                    seen (true)
//
// Connection:
//   connect()            open (and keep reopening) the socket
//   retryNow()           while waiting to reconnect: reconnect at once (the
//                        backoff starts over); no effect otherwise
//   close()              close for good: no reconnect; pending controls reject
//   setToken(token)      use token from now on; on an open socket a fresh
//                        hello renews the credentials at once (the hub
//                        answers welcome again: event "renewed")
//   state                "idle" | "connecting" | "open" | "reconnecting" |
//                        "unauthorized" | "closed"   ("open" = welcomed)
//   welcome              the last welcome message, or null
//
// Subscriptions (remembered and re-sent after every reconnect):
//   watch({ all: true }) | watch(["s1", "s2"])     status of these sessions
//   unwatch({ all: true }) | unwatch(["s1"])
//   focus(sessionId | null, { cursor })            the one streamed session
//       cursor undefined: resume after the last event this client delivered
//                         for that session (none seen: the latest run from 1)
//       cursor null:      forget what was delivered; replay the latest run
//       cursor "run:seq": replay after that event
//   focused               the focused session id, or null
//   replaying             true from a focus until its `replayed`
//
// Controls (each resolves with the control_result — check .accepted and
// .status — and rejects on timeout, on an `error` whose ref is its id, or
// when the socket drops before the answer; a control issued while the socket
// is not welcomed is refused at once with code "client_disconnected" and is
// never sent later: an action must not happen minutes after the user gave
// up on it):
//   control(op, fields, { timeoutMs })  → Promise<ControlResult>
//   start({ session_id?, message, metadata?, … })
//   cancel({ run_id } | { session_id })
//   approve({ run_id, approval_id, choice })
//   clarify({ run_id, clarify_id, response })
//   queue({ session_id, message, mode? })          mode "queue" | "steer"
//   goal({ session_id, action, text? })            set|pause|resume|clear|status|edit
//   ping() → Promise<{ id, time, rtt_ms }>
//
// State:
//   sessions                       Map session_id → newest SessionStatus
//   cursorOf(sessionId)            "run_id:seq" of the last delivered event
//   lastSeq(runId)                 highest delivered seq of a run (0: none)
//   forget(sessionId)              drop the delivered-event memory of a session
//
// Listeners: on(type, fn) returns an unsubscribe function; off(type, fn).
//   "state"          { state, attempt, delay_ms }   on every state change
//   "open"           welcome                       after each welcome
//   "renewed"        welcome                       the hub took renewed
//                                                  credentials (same socket)
//   "close"          { code, reason, reconnect, delay_ms }
//   "status"         SessionStatus (one with deleted: true is the last of a
//                    deleted session, which has left .sessions)
//   "event"          envelope — deduplicated (run_id + seq: only seq above
//                    the highest delivered for its run), focused session only.
//                    With compact, a replayed one may carry seq_from: it
//                    stands for seqs seq_from..seq (its text is theirs)
//   "replayed"       { session_id, cursor, count }
//   "reset"          { session_id, reason } — delivered events of the session
//                    are no longer a valid base (bad_cursor): the hub replays
//                    the latest run from seq 1; drop what was rendered
//   "gap"            { run_id, after_seq, got_seq } — a seq gap; resyncing
//   "control_result" the raw control_result message
//   "error"          (msg, { settled }) an `error` message from the hub, or a
//                    client-side { code: "client_*", message }; settled is
//                    true when it rejected a pending control or ping
//   "goaway"         the goaway message
//   "pong"           the pong message
//   "message"        every parsed hub message, before any handling

const PROTOCOL = "runhub.v1";

const DEFAULT_BACKOFF = { initialMs: 250, maxMs: 5000, factor: 2, jitter: 0.5 };

// A connection that lived at least this long after its welcome resets the
// backoff; one that flaps right after welcome keeps backing off.
const STABLE_MS = 5000;

// How long a newer run named by the focused session's status may go without
// any of its events arriving before the client asks for it.
const LATEST_RUN_GRACE_MS = 1000;

function defaultURL() {
  const loc = globalThis.location;
  if (!loc || !loc.host) return "ws://127.0.0.1:8080/v1/ws";
  return (loc.protocol === "https:" ? "wss://" : "ws://") + loc.host + "/v1/ws";
}

// parseCursor splits "run_id:seq" at its last colon.
export function parseCursor(cursor) {
  if (typeof cursor !== "string") return null;
  const i = cursor.lastIndexOf(":");
  if (i <= 0 || i === cursor.length - 1) return null;
  const seq = Number(cursor.slice(i + 1));
  if (!Number.isSafeInteger(seq) || seq < 0) return null;
  return { run_id: cursor.slice(0, i), seq };
}

// parseFrame splits one NDJSON frame into messages; a line that is not JSON
// is reported through onBad and skipped.
export function parseFrame(data, onBad) {
  const out = [];
  for (const line of String(data).split("\n")) {
    const s = line.trim();
    if (!s) continue;
    try {
      const msg = JSON.parse(s);
      if (msg && typeof msg === "object" && typeof msg.type === "string") out.push(msg);
      else if (onBad) onBad(s, new Error("message without a type"));
    } catch (err) {
      if (onBad) onBad(s, err);
    }
  }
  return out;
}

// jwtExpiry returns the exp of a JWT in ms since the epoch, or 0 when the
// token is not a JWT with a numeric exp. The token is not verified: the
// client only needs to know when to renew it.
export function jwtExpiry(token) {
  const parts = typeof token === "string" ? token.split(".") : [];
  if (parts.length !== 3) return 0;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)));
    return typeof claims.exp === "number" ? claims.exp * 1000 : 0;
  } catch {
    return 0;
  }
}

export class RunhubClient {
  constructor(options = {}) {
    this.url = options.url || defaultURL();
    this.token = options.token || "";
    this.getToken = typeof options.getToken === "function" ? options.getToken : null;
    this.renewBeforeMs = options.renewBeforeMs ?? 60000;
    this.clientName = options.client || "runhub-web/1";
    this.WS = options.WebSocket || globalThis.WebSocket;
    this.controlTimeoutMs = options.controlTimeoutMs ?? 15000;
    this.helloTimeoutMs = options.helloTimeoutMs ?? 10000;
    this.pingIntervalOption = options.pingIntervalMs;
    this.backoff = { ...DEFAULT_BACKOFF, ...(options.backoff || {}) };
    this.resyncOnGap = options.resyncOnGap ?? true;
    this.compact = options.compact ?? true;

    this.state = "idle";
    this.welcome = null;
    this.sessions = new Map();

    this._listeners = new Map();
    this._ws = null;
    this._wanted = false; // connect() called and close() not
    this._attempt = 0;
    this._retryTimer = null;
    this._helloTimer = null;
    this._pingTimer = null;
    this._renewTimer = null;
    this._welcomedAt = 0;
    this._goawayDelay = null; // reconnect_after_ms of a goaway on this socket

    this._watchAll = false;
    this._watched = new Set();
    this._focus = null; // focused session id
    this.replaying = false;

    this._runs = new Map(); // run_id → { session_id, seq } highest delivered
    this._sessionCursor = new Map(); // session_id → { run_id, seq } last delivered
    this._resyncing = new Map(); // run_id → seq the resync focus asked from
    this._latestTimer = null;

    this._seq = 0;
    this._idPrefix = Math.random().toString(36).slice(2, 8);
    this._pending = new Map(); // id → { resolve, reject, timer, kind, msg, sent }
  }

  // ---- listeners -------------------------------------------------------

  on(type, fn) {
    let set = this._listeners.get(type);
    if (!set) this._listeners.set(type, (set = new Set()));
    set.add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    const set = this._listeners.get(type);
    if (set) set.delete(fn);
  }

  _emit(type, value, extra) {
    const set = this._listeners.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(value, extra);
      } catch (err) {
        // A listener's bug must not break the protocol loop.
        setTimeout(() => {
          throw err;
        });
      }
    }
  }

  _setState(state, extra = {}) {
    if (this.state === state && !extra.force) return;
    this.state = state;
    this._emit("state", { state, attempt: this._attempt, delay_ms: extra.delay_ms ?? 0 });
  }

  // ---- connection ------------------------------------------------------

  connect() {
    this._wanted = true;
    if (this._ws || this._retryTimer) return;
    this._open();
  }

  retryNow() {
    if (!this._wanted || !this._retryTimer) return;
    clearTimeout(this._retryTimer);
    this._attempt = 0;
    this._open();
  }

  close() {
    this._wanted = false;
    clearTimeout(this._latestTimer);
    this._latestTimer = null;
    clearTimeout(this._retryTimer);
    this._retryTimer = null;
    this._stopTimers();
    const ws = this._ws;
    this._ws = null;
    if (ws) {
      this._detach(ws);
      try {
        ws.close(1000, "client closing");
      } catch {
        /* already closed */
      }
    }
    this._failPending("client closed", true);
    this.welcome = null;
    this._setState("closed");
  }

  setToken(token) {
    this.token = token || "";
    if (this.welcome && this.token) this._sendRaw({ type: "hello", token: this.token, client: this.clientName, capabilities: this.compact ? ["compact_replay"] : undefined });
  }

  // _freshToken asks getToken (when set) for the token of the next hello;
  // a failure keeps the current one.
  async _freshToken() {
    if (!this.getToken) return;
    try {
      const t = await this.getToken();
      if (typeof t === "string" && t) this.token = t;
    } catch (err) {
      this._emit("error", { code: "client_token", message: `getToken failed: ${err && err.message ? err.message : err}` });
    }
  }

  // _scheduleRenewal arms the renewal of a JWT with exp, when getToken can
  // give a new one.
  _scheduleRenewal() {
    clearTimeout(this._renewTimer);
    this._renewTimer = null;
    const exp = jwtExpiry(this.token);
    if (!this.getToken || !exp) return;
    const left = exp - Date.now();
    if (left <= 0) return; // expired: the hub closes the socket (4401)
    const ws = this._ws;
    // renewBeforeMs ahead, but never in the first half of what is left: a
    // short-lived token must not make the client renew in a tight loop.
    // (setTimeout fires at once past 2^31-1 ms: a long-lived token is
    // looked at again after ~24 days.)
    const delay = Math.min(Math.max(left - this.renewBeforeMs, left / 2), 2 ** 31 - 1);
    this._renewTimer = setTimeout(async () => {
      this._renewTimer = null;
      const before = this.token;
      await this._freshToken();
      if (ws !== this._ws || !this.welcome) return;
      if (this.token !== before) {
        this.setToken(this.token);
      } else if (exp - Date.now() > 1000) {
        // No new token yet: ask again a little later, until expiry.
        this._renewTimer = setTimeout(() => this._scheduleRenewal(), Math.min(10000, (exp - Date.now()) / 2));
      }
    }, delay);
  }

  _open() {
    this._retryTimer = null;
    if (!this.WS) {
      this._emit("error", { code: "client_no_websocket", message: "no WebSocket implementation" });
      return;
    }
    this._setState(this._attempt === 0 && !this.welcome ? "connecting" : "reconnecting");
    this.welcome = null;
    this._goawayDelay = null;
    let ws;
    try {
      ws = new this.WS(this.url, [PROTOCOL]);
    } catch (err) {
      this._emit("error", { code: "client_connect", message: String(err && err.message ? err.message : err) });
      this._scheduleReconnect(null);
      return;
    }
    this._ws = ws;
    const hello = () => {
      if (ws !== this._ws) return;
      this._sendRaw({ type: "hello", token: this.token || undefined, client: this.clientName, capabilities: this.compact ? ["compact_replay"] : undefined });
      this._helloTimer = setTimeout(() => {
        if (ws !== this._ws || this.welcome) return;
        this._emit("error", { code: "client_hello_timeout", message: "no welcome from the hub" });
        this._drop(ws, 4000, "hello timeout");
      }, this.helloTimeoutMs);
    };
    ws.onopen = () => {
      if (ws !== this._ws) return;
      if (this.getToken) this._freshToken().then(hello);
      else hello();
    };
    ws.onmessage = (ev) => {
      if (ws !== this._ws) return;
      const msgs = parseFrame(ev.data, (line, err) =>
        this._emit("error", { code: "client_bad_frame", message: `unparseable message: ${err.message}`, ref: line.slice(0, 80) }),
      );
      for (const msg of msgs) this._handle(msg);
    };
    ws.onclose = (ev) => {
      if (ws !== this._ws) return;
      this._onClosed(ev.code, ev.reason || "");
    };
    ws.onerror = () => {
      // onclose follows and carries the code; nothing to do here.
    };
  }

  _detach(ws) {
    ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
  }

  // _drop abandons a socket from our side and goes through the close path.
  _drop(ws, code, reason) {
    if (ws !== this._ws) return;
    this._detach(ws);
    try {
      ws.close(code >= 4000 || code === 1000 ? code : 1000, reason);
    } catch {
      /* ignore */
    }
    this._onClosed(code, reason);
  }

  _onClosed(code, reason) {
    this._ws = null;
    this._stopTimers();
    const wasWelcomed = !!this.welcome;
    if (wasWelcomed && Date.now() - this._welcomedAt >= STABLE_MS) this._attempt = 0;
    this.welcome = null;
    this._failPending("connection lost before the answer", false);
    if (!this._wanted) {
      this._emit("close", { code, reason, reconnect: false, delay_ms: 0 });
      this._setState("closed");
      return;
    }
    if (code === 4401) {
      // Unauthorized: retrying with the same token cannot succeed; with a
      // getToken that has a new one, reconnect with it.
      const failed = this.token;
      const giveUp = () => {
        this._wanted = false;
        this._emit("close", { code, reason, reconnect: false, delay_ms: 0 });
        this._setState("unauthorized");
      };
      if (!this.getToken) return giveUp();
      this._freshToken().then(() => {
        if (!this._wanted || this._ws || this._retryTimer) return;
        if (this.token && this.token !== failed) this._scheduleReconnect({ code, reason });
        else giveUp();
      });
      return;
    }
    this._scheduleReconnect({ code, reason });
  }

  _scheduleReconnect(closeInfo) {
    let delay;
    if (this._goawayDelay != null) {
      // Honour the hub's delay; spread the herd a little, never earlier.
      const base = Math.max(0, this._goawayDelay);
      delay = base + Math.random() * Math.min(2000, base * 0.5 + 250);
      this._goawayDelay = null;
    } else {
      const b = this.backoff;
      const ceil = Math.min(b.maxMs, b.initialMs * Math.pow(b.factor, this._attempt));
      delay = ceil * (1 - b.jitter * Math.random());
    }
    delay = Math.round(delay);
    this._attempt++;
    if (closeInfo) this._emit("close", { code: closeInfo.code, reason: closeInfo.reason, reconnect: true, delay_ms: delay });
    this._setState("reconnecting", { delay_ms: delay, force: true });
    clearTimeout(this._retryTimer);
    this._retryTimer = setTimeout(() => this._open(), delay);
  }

  _stopTimers() {
    clearTimeout(this._helloTimer);
    clearInterval(this._pingTimer);
    clearTimeout(this._renewTimer);
    this._helloTimer = this._pingTimer = this._renewTimer = null;
  }

  _sendRaw(msg) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) return false;
    try {
      ws.send(JSON.stringify(msg));
      return true;
    } catch {
      return false;
    }
  }

  // _send sends a subscription message now if welcomed; otherwise the
  // resubscribe after the next welcome carries the same intent.
  _send(msg) {
    if (this.state !== "open") return false;
    return this._sendRaw(msg);
  }

  // ---- incoming --------------------------------------------------------

  _handle(msg) {
    this._emit("message", msg);
    switch (msg.type) {
      case "welcome":
        return this._onWelcome(msg);
      case "status":
        return this._onStatus(msg.session);
      case "event":
        return this._onEvent(msg.event);
      case "replayed":
        if (msg.session_id !== this._focus) return;
        this.replaying = false;
        this._emit("replayed", msg);
        this._checkLatestRun(msg.session_id);
        return;
      case "control_result":
        this._settle(msg.id, (p) => p.resolve(msg));
        this._emit("control_result", msg);
        return;
      case "pong":
        this._settle(msg.id, (p) => p.resolve({ id: msg.id, time: msg.time, rtt_ms: Date.now() - p.sentAt }));
        this._emit("pong", msg);
        return;
      case "error":
        return this._onError(msg);
      case "goaway":
        this._goawayDelay = Math.max(0, Number(msg.reconnect_after_ms) || 0);
        this._emit("goaway", msg);
        return;
      default:
        // Unknown types are allowed by the protocol's evolution rules.
        return;
    }
  }

  _onWelcome(msg) {
    clearTimeout(this._helloTimer);
    this._helloTimer = null;
    if (this.welcome && msg.conn_id === this.welcome.conn_id) {
      // The answer to a renewal hello: same socket, same subscriptions.
      this.welcome = msg;
      this._scheduleRenewal();
      this._emit("renewed", msg);
      return;
    }
    this.welcome = msg;
    this._welcomedAt = Date.now();
    this._setState("open");
    // Restore every intent: watch set, focus with the resume cursor.
    if (this._watchAll) this._sendRaw({ type: "watch", all: true });
    if (this._watched.size) this._sendRaw({ type: "watch", sessions: [...this._watched] });
    if (this._focus !== null) this._sendFocus(this._focus, undefined);
    this._startPing();
    this._scheduleRenewal();
    this._emit("open", msg);
  }

  _startPing() {
    clearInterval(this._pingTimer);
    const limits = (this.welcome && this.welcome.limits) || {};
    const period = this.pingIntervalOption ?? (limits.ping_interval_ms || 25000);
    if (!period) return;
    const ws = this._ws;
    this._pingTimer = setInterval(() => {
      if (ws !== this._ws) return;
      this.ping().catch(() => {
        // No pong in time: the socket is dead even if the browser has not
        // noticed. Reconnect.
        if (ws === this._ws) this._drop(ws, 4000, "ping timeout");
      });
    }, period);
  }

  _onStatus(s) {
    if (!s || typeof s.session_id !== "string") return;
    if (s.deleted) {
      // The session is gone: drop it (and its watch by id, which a
      // reconnect would otherwise send again), then tell the listeners.
      this.sessions.delete(s.session_id);
      this._watched.delete(s.session_id);
      this.forget(s.session_id);
      this._emit("status", s);
      return;
    }
    const prev = this.sessions.get(s.session_id);
    // A status of the same run that is behind what we hold is stale (e.g. a
    // lagging replica); drop it.
    if (prev && prev.run_id && prev.run_id === s.run_id && (s.last_seq || 0) < (prev.last_seq || 0)) return;
    this.sessions.set(s.session_id, s);
    this._emit("status", s);
    // A newer run of the focused session should stream on its own; if none
    // of its events came after a while, fetch it (see _checkLatestRun).
    if (s.session_id === this._focus && s.run_id && !this._runs.has(s.run_id) && !this._latestTimer) {
      this._latestTimer = setTimeout(() => {
        this._latestTimer = null;
        if (this.state === "open" && !this.replaying && this._focus === s.session_id) this._checkLatestRun(s.session_id);
      }, LATEST_RUN_GRACE_MS);
    }
  }

  _onEvent(e) {
    if (!e || typeof e.run_id !== "string" || typeof e.seq !== "number") return;
    // Events of a session we no longer focus are leftovers of the previous
    // focus; the cursor we keep for that session excludes them, so a later
    // focus replays them.
    if (e.session_id !== this._focus) return;
    const run = this._runs.get(e.run_id);
    const have = run ? run.seq : 0;
    if (e.seq <= have) return; // duplicate across the replay/live seam
    // A compacted record stands for seq_from..seq; its text cannot be cut,
    // so one that starts at or before what was delivered is refetched from
    // there (the hub never sends one within a focus: it is a leftover).
    const first = typeof e.seq_from === "number" && e.seq_from > 0 && e.seq_from <= e.seq ? e.seq_from : e.seq;
    // A run's events arrive from seq 1 (a replay without a cursor or a later
    // run after a cursor) or right after the last one delivered; anything
    // else means events were lost in between.
    if ((first > have + 1 || first <= have) && this.resyncOnGap) {
      if (this._resyncing.get(e.run_id) !== have) {
        this._resyncing.set(e.run_id, have);
        this._emit("gap", { run_id: e.run_id, after_seq: have, got_seq: e.seq });
        this._sendFocus(e.session_id, `${e.run_id}:${have}`, true);
      }
      return;
    }
    this._resyncing.delete(e.run_id);
    this._runs.set(e.run_id, { session_id: e.session_id, seq: e.seq });
    this._sessionCursor.set(e.session_id, { run_id: e.run_id, seq: e.seq });
    this._emit("event", e);
  }

  // _checkLatestRun closes a hole a resumed replay can leave: the session's
  // status names a newer run than the cursor's, yet the replay ended without
  // it (runs that began and ended while the session was not focused). The
  // newer run is then replayed from its start.
  _checkLatestRun(sid) {
    const st = this.sessions.get(sid);
    const cur = this._sessionCursor.get(sid);
    if (!this.resyncOnGap || !st || !st.run_id || !cur || cur.run_id === st.run_id) return;
    if (this._runs.has(st.run_id) || !(st.last_seq > 0) || this._resyncing.get(st.run_id) === 0) return;
    this._resyncing.set(st.run_id, 0);
    this._emit("gap", { run_id: st.run_id, after_seq: 0, got_seq: st.last_seq });
    this._sendFocus(sid, `${st.run_id}:0`, true);
  }

  _onError(msg) {
    if (msg.code === "bad_cursor") {
      // The hub falls back to the latest run from seq 1: what we delivered
      // is no longer a base to build on.
      const sid = this._focus;
      if (sid !== null) {
        this.forget(sid);
        this._emit("reset", { session_id: sid, reason: msg.message || "bad cursor" });
      }
    }
    let settled = false;
    if (msg.ref && this._pending.has(msg.ref)) {
      const err = new Error(msg.message || msg.code);
      err.code = msg.code;
      err.ref = msg.ref;
      this._settle(msg.ref, (p) => p.reject(err));
      settled = true;
    }
    this._emit("error", msg, { settled });
  }

  // ---- subscriptions ---------------------------------------------------

  watch(arg) {
    if (arg && !Array.isArray(arg) && arg.all) {
      this._watchAll = true;
      this._send({ type: "watch", all: true });
      return;
    }
    const ids = (Array.isArray(arg) ? arg : arg && arg.sessions) || [];
    const fresh = ids.filter((id) => !this._watched.has(id));
    fresh.forEach((id) => this._watched.add(id));
    if (fresh.length) this._send({ type: "watch", sessions: fresh });
  }

  unwatch(arg) {
    if (arg && !Array.isArray(arg) && arg.all) {
      this._watchAll = false;
      this._watched.clear();
      this._send({ type: "unwatch", all: true });
      return;
    }
    const ids = ((Array.isArray(arg) ? arg : arg && arg.sessions) || []).filter((id) => this._watched.has(id));
    ids.forEach((id) => this._watched.delete(id));
    if (ids.length) this._send({ type: "unwatch", sessions: ids });
  }

  get focused() {
    return this._focus;
  }

  focus(sessionId, opts = {}) {
    const sid = sessionId || null;
    this._focus = sid;
    this._resyncing.clear();
    if (sid === null) {
      this.replaying = false;
      this._send({ type: "focus", session_id: null });
      return;
    }
    if (opts.cursor === null) {
      this.forget(sid);
    } else if (typeof opts.cursor === "string") {
      const c = parseCursor(opts.cursor);
      this.forget(sid);
      if (c) {
        this._runs.set(c.run_id, { session_id: sid, seq: c.seq });
        this._sessionCursor.set(sid, c);
      }
    }
    this._sendFocus(sid, undefined);
  }

  _sendFocus(sid, cursor, resync = false) {
    if (cursor === undefined) cursor = this.cursorOf(sid);
    if (!resync) this.replaying = true;
    const msg = { type: "focus", session_id: sid };
    if (cursor) msg.cursor = cursor;
    this._send(msg);
  }

  cursorOf(sessionId) {
    const c = this._sessionCursor.get(sessionId);
    return c ? `${c.run_id}:${c.seq}` : null;
  }

  lastSeq(runId) {
    const r = this._runs.get(runId);
    return r ? r.seq : 0;
  }

  forget(sessionId) {
    this._sessionCursor.delete(sessionId);
    for (const [rid, r] of this._runs) if (r.session_id === sessionId) this._runs.delete(rid);
  }

  // ---- controls --------------------------------------------------------

  _nextId(prefix) {
    this._seq++;
    return `${prefix}${this._idPrefix}${this._seq}`;
  }

  _settle(id, fn) {
    const p = id != null && this._pending.get(id);
    if (!p) return;
    this._pending.delete(id);
    clearTimeout(p.timer);
    fn(p);
  }

  // _failPending rejects what can no longer be answered: everything sent on
  // the socket that dropped (nothing unsent is ever pending for long: a
  // request on a socket that is not welcomed is refused at once).
  _failPending(message, all) {
    for (const [id, p] of [...this._pending]) {
      if (!all && !p.sent) continue;
      const err = new Error(message);
      err.code = "client_disconnected";
      this._settle(id, (q) => q.reject(err));
    }
  }

  _request(kind, msg, timeoutMs) {
    return new Promise((resolve, reject) => {
      const p = { resolve, reject, kind, msg, sent: false, sentAt: Date.now(), timer: null };
      p.timer = setTimeout(() => {
        if (this._pending.get(msg.id) !== p) return;
        this._pending.delete(msg.id);
        const err = new Error(`${kind} ${msg.op || ""} timed out after ${timeoutMs} ms`.replace("  ", " "));
        err.code = "client_timeout";
        reject(err);
      }, timeoutMs);
      this._pending.set(msg.id, p);
      if (this.state === "open") p.sent = this._sendRaw(msg);
      if (!p.sent) {
        // Not connected: refused now, never queued for a later socket.
        this._settle(msg.id, (q) => {
          const err = new Error(`not connected to the hub; the ${kind === "ping" ? "ping" : msg.op || kind} was not sent`);
          err.code = "client_disconnected";
          q.reject(err);
        });
      }
    });
  }

  control(op, fields = {}, opts = {}) {
    const msg = { ...fields, type: "control", op, id: this._nextId("c") };
    for (const k of Object.keys(msg)) if (msg[k] === undefined) delete msg[k];
    return this._request("control", msg, opts.timeoutMs ?? this.controlTimeoutMs);
  }

  start(fields) {
    return this.control("start", fields);
  }

  cancel(fields) {
    return this.control("cancel", fields);
  }

  approve(fields) {
    return this.control("approve", fields);
  }

  clarify(fields) {
    return this.control("clarify", fields);
  }

  queue(fields) {
    return this.control("queue", fields);
  }

  goal(fields) {
    return this.control("goal", fields);
  }

  ping(opts = {}) {
    return this._request("ping", { type: "ping", id: this._nextId("p") }, opts.timeoutMs ?? this.controlTimeoutMs);
  }
}

export default RunhubClient;
