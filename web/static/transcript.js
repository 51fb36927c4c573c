// transcript.js — renders one session's events as a transcript: one section
// per run, in the order the runs arrive. Events are queued by push and
// applied in one go by flush (called from the workbench's animation frame),
// so a burst of token deltas costs one layout.
//
// A SessionView outlives its focus: when the session is focused again the
// client resumes after the last event it delivered, and the view keeps
// appending.

import { h, statusLabel, fmtDuration, fmtCount, fmtClock, shortId } from "./dom.js";
import { renderMarkdownParts } from "./markdown.js";
import { ToolCard, ApprovalCard, ClarifyCard } from "./cards.js";

// Assistant text is rendered as Markdown: as it streams, once per frame,
// only its last blocks (from the last blank line that ends a block) are
// rendered again. A message whose text after its last blank line passes
// MAX_MARKDOWN characters (one huge paragraph or code block), or that
// passes MAX_MARKDOWN_TOTAL, shows as plain text instead, so a huge answer
// cannot make every frame expensive.
const MAX_MARKDOWN = 64 * 1024;
const MAX_MARKDOWN_TOTAL = 1024 * 1024;

// Plain text is shown in blocks of about this many characters (see
// renderPlain).
const PLAIN_CHUNK = 8 * 1024;

export class SessionView {
  // ctx: { status(): SessionStatus|undefined, approve(run, card, choice),
  //        clarify(run, card, response), fetchJSON(path) → Promise<body>,
  //        loadOlder(view), keepScroll(view, fn): run fn, which inserts
  //        above what is shown, without moving what the user looks at,
  //        caughtUp() (optional) → Promise: settles when the socket's
  //        catch-up of this session is in (or will not come) }
  constructor(sessionId, ctx) {
    this.sessionId = sessionId;
    this.ctx = ctx;
    this.historyEl = h("div", { class: "history", testid: "history" });
    this.runsEl = h("div", { class: "runs" });
    this.el = h("div", { class: "session-transcript", "data-session-id": sessionId }, this.historyEl, this.runsEl);
    this.runs = new Map();
    this.pending = [];
    this.dirtyText = new Set(); // assistant messages whose text grew
    this.goal = null;
    this.queue = null;
    this.scrollTop = null; // where the pane was scrolled when it lost focus; null: the end
    // History: the session's earlier runs, read over HTTP a page at a time
    // (newest first); oldest is where the next page starts.
    this.history = { loaded: false, loading: null, more: true, oldest: null, error: "", gen: 0 };
    this.renderHistory();
  }

  push(e) {
    this.pending.push(e);
  }

  clear() {
    this.pending = [];
    this.runs.clear();
    this.runsEl.replaceChildren();
    this.history = { loaded: false, loading: null, more: true, oldest: null, error: "", gen: this.history.gen + 1 };
    this.renderHistory();
  }

  // runView returns the run's view, making it in its place: runs are shown
  // oldest first, by when they started. startedAt (epoch seconds) is the
  // run's start when the caller knows it (its run.started, its summary),
  // else the time of the first event seen of it, until a better one comes.
  // Run ids are no order: an imported run keeps WebUI's random hex id.
  runView(runId, startedAt, exact = false) {
    let run = this.runs.get(runId);
    if (run) {
      if (startedAt && exact && (!run.startExact || run.startedAt !== startedAt)) {
        run.startedAt = startedAt;
        run.startExact = true;
        this.place(run);
      }
      return run;
    }
    run = new RunView(this, runId);
    run.startedAt = startedAt || 0;
    run.startExact = !!(startedAt && exact);
    this.runs.set(runId, run);
    this.place(run);
    return run;
  }

  // place puts a run's section among the others by start (then id, for
  // runs that started at the same time).
  place(run) {
    run.el.dataset.startedAt = String(run.startedAt);
    let next = null;
    for (const el of this.runsEl.children) {
      if (el === run.el) continue;
      const other = this.runs.get(el.dataset.runId);
      if (other && runBefore(run, other)) {
        next = el;
        break;
      }
    }
    if (next !== run.el.nextSibling || run.el.parentNode !== this.runsEl) this.runsEl.insertBefore(run.el, next);
  }

  // loadOlder reads the next page of earlier runs (GET /v1/sessions/{sid}/runs)
  // and each run's events (GET /v1/runs/{rid}/events), and renders them
  // above the runs shown. It reports whether it added anything.
  loadOlder(pageSize = 10) {
    const hist = this.history;
    if (hist.loading) return hist.loading;
    if (!hist.more) return Promise.resolve(false);
    const gen = hist.gen;
    hist.error = "";
    hist.loading = (async () => {
      let added = false;
      try {
        const q = new URLSearchParams({ limit: String(pageSize) });
        if (hist.oldest) q.set("before", hist.oldest);
        // The first page names the latest run, which the socket replays
        // (compacted): wait for that catch-up rather than read the run's
        // every event over HTTP too, or ask the hub for anything while it
        // sends the catch-up.
        if (!hist.oldest && this.ctx.caughtUp) await this.ctx.caughtUp();
        if (gen !== this.history.gen) return false;
        const page = await this.ctx.fetchJSON(`/v1/sessions/${encodeURIComponent(this.sessionId)}/runs?${q}`);
        if (gen !== this.history.gen) return false;
        const runs = page.runs || [];
        // Read every run's events before rendering any, so the page lands at once.
        // (A run the socket already brought is its to complete.)
        const fromSocket = new Set(this.pending.map((e) => e.run_id));
        const loaded = [];
        for (const sum of runs) {
          if (this.runs.has(sum.run_id) || fromSocket.has(sum.run_id)) continue;
          loaded.push([sum, await this.readRun(sum.run_id)]);
          if (gen !== this.history.gen) return false;
        }
        // Nothing read: nothing to lay out again.
        if (loaded.length) {
          this.ctx.keepScroll(this, () => {
            for (const [sum, events] of loaded) {
              added = added || !this.runs.has(sum.run_id);
              const run = this.runView(sum.run_id, sum.created_at, true);
              for (const e of events) {
                try {
                  run.apply(e, true);
                } catch (err) {
                  console.error("runhub: cannot render event", e, err);
                }
              }
            }
            this.renderText();
          });
        }
        if (runs.length) hist.oldest = runs[runs.length - 1].run_id;
        hist.more = !!page.more;
        hist.loaded = true;
        this.refreshControls(this.ctx.status());
      } catch (err) {
        if (gen === this.history.gen) hist.error = err && err.message ? err.message : String(err);
      } finally {
        if (gen === this.history.gen) {
          hist.loading = null;
          this.renderHistory();
        }
      }
      return added;
    })();
    this.renderHistory();
    return hist.loading;
  }

  // readRun reads every event of a run, a page at a time.
  async readRun(runId) {
    const out = [];
    let after = 0;
    for (;;) {
      const page = await this.ctx.fetchJSON(`/v1/runs/${encodeURIComponent(runId)}/events?after_seq=${after}&limit=1000`);
      const events = page.events || [];
      out.push(...events);
      if (events.length < 1000 || events[events.length - 1].terminal) return out;
      after = events[events.length - 1].seq;
    }
  }

  renderHistory() {
    const hist = this.history;
    let node;
    if (hist.loading) node = h("div", { class: "history-note dim", testid: "history-loading", text: "loading earlier runs…" });
    else if (hist.error)
      node = h("div", { class: "history-note" }, h("span", { class: "dim", text: `earlier runs could not be loaded: ${hist.error} ` }), h("button", { type: "button", class: "btn btn-small btn-ghost", testid: "history-more", text: "retry", onclick: () => this.ctx.loadOlder(this) }));
    else if (hist.more && hist.loaded) node = h("button", { type: "button", class: "btn btn-small btn-ghost history-more", testid: "history-more", text: "↑ earlier runs", onclick: () => this.ctx.loadOlder(this) });
    else if (hist.loaded) node = h("div", { class: "history-note dim", testid: "history-start", text: "beginning of the session" });
    this.historyEl.replaceChildren(...(node ? [node] : []));
  }

  // flush applies the queued events; it reports whether anything changed.
  // With holdText (a catch-up is still arriving) the text of the messages
  // waits for a later flush: rendering it on every frame of a replay would
  // lay out a long answer again and again before it is whole.
  flush(holdText = false) {
    const text = !holdText && this.dirtyText.size > 0;
    if (!this.pending.length && !text) return false;
    const batch = this.pending;
    this.pending = [];
    for (const e of batch) {
      const run = this.runView(e.run_id, e.created_at, e.type === "run.started");
      try {
        run.apply(e);
      } catch (err) {
        console.error("runhub: cannot render event", e, err);
      }
    }
    if (!holdText) this.renderText();
    if (batch.length) this.refreshControls(this.ctx.status());
    return true;
  }

  // renderText renders the assistant messages whose text grew.
  renderText() {
    for (const m of this.dirtyText) renderMessage(m);
    this.dirtyText.clear();
  }

  // stopCarets ends every streaming caret (the socket is down: nothing is
  // streaming as far as this tab knows); new text brings it back.
  stopCarets() {
    for (const run of this.runs.values()) run.stopCaret();
  }

  // refreshControls shows the prompt controls the session's active_controls
  // allow, on the prompts of its latest run only.
  refreshControls(st) {
    const controls = new Set((st && st.active_controls) || []);
    for (const run of this.runs.values()) {
      const latest = st && st.run_id === run.id && !run.terminal;
      for (const card of run.approvals.values()) {
        const waiting = st && st.pending_approval && st.pending_approval.approval_id === card.id;
        card.setActionable(latest && controls.has("approve") && (waiting || !st.pending_approval));
      }
      for (const card of run.clarifies.values()) {
        const waiting = st && st.pending_clarify && st.pending_clarify.clarify_id === card.id;
        card.setActionable(latest && controls.has("clarify") && (waiting || !st.pending_clarify));
      }
    }
  }
}

// runBefore reports whether run a is shown above run b: it started
// earlier (a run whose start is not known yet goes last), or at the same
// time with a smaller id.
function runBefore(a, b) {
  const x = a.startedAt || Infinity;
  const y = b.startedAt || Infinity;
  if (x !== y) return x < y;
  return a.id < b.id;
}

class RunView {
  constructor(view, runId) {
    this.view = view;
    this.id = runId;
    this.status = "queued";
    this.terminal = null;
    this.lastSeq = 0;
    this.streamed = false;
    this.messages = new Map();
    this.reasoning = new Map();
    this.tools = new Map();
    this.approvals = new Map();
    this.clarifies = new Map();
    this.streamingEl = null;
    // Text length of each delta read over HTTP (seq → length) since the
    // last other event: a compacted record from the socket that overlaps
    // them is cut by it.
    this.historyDeltas = new Map();

    this.chip = h("span", { class: "run-chip", "data-status": "queued", text: "queued" });
    this.timeEl = h("span", { class: "dim" });
    this.metaEl = h("span", { class: "run-meta dim" });
    this.usageEl = h("span", { class: "run-usage mono dim", testid: "run-usage" });
    this.head = h("div", { class: "run-head" }, this.chip, h("span", { class: "mono dim", title: runId, text: shortId(runId) }), this.timeEl, this.metaEl, this.usageEl);
    this.body = h("div", { class: "run-body" });
    this.activityText = h("span", { class: "activity-text", text: "waiting for the agent…" });
    this.activity = h("div", { class: "activity", testid: "activity" }, h("span", { class: "spinner", "aria-hidden": "true" }), this.activityText);
    this.el = h("section", { class: "run active", testid: "run", "data-run-id": runId, "data-status": "queued" }, this.head, this.body, this.activity);
  }

  setStatus(status) {
    this.status = status;
    this.chip.dataset.status = status;
    this.chip.textContent = statusLabel(status);
    this.el.dataset.status = status;
  }

  // add appends a transcript item; a new item ends the streaming caret of
  // the previous text.
  add(node) {
    this.stopCaret();
    this.body.append(node);
    return node;
  }

  stopCaret() {
    if (this.streamingEl) {
      this.streamingEl.classList.remove("streaming");
      this.streamingEl = null;
    }
  }

  apply(e, fromHistory = false) {
    // A run's events can come twice, from the socket and from the history
    // read; each source delivers them in order, so the seq decides.
    if (e.seq <= this.lastSeq) return;
    let p = e.payload || {};
    const delta = e.type === "token.delta" || e.type === "reasoning.delta";
    if (delta && e.seq_from && e.seq_from <= this.lastSeq) {
      // A compacted record (seq_from..seq) of which the history read
      // already applied seq_from..lastSeq: apply only the rest of its text.
      let skip = 0;
      for (let s = e.seq_from; s <= this.lastSeq; s++) skip += this.historyDeltas.get(s) || 0;
      p = { ...p, text: (p.text || "").slice(skip) };
    }
    if (!delta) this.historyDeltas.clear();
    else if (fromHistory && !e.seq_from) this.historyDeltas.set(e.seq, (p.text || "").length);
    this.lastSeq = e.seq;
    this.el.dataset.lastSeq = String(e.seq);
    if (this.status === "queued" && e.type !== "status" && !e.terminal) this.setStatus("running");
    switch (e.type) {
      case "run.started":
        return this.started(e, p);
      case "status":
        if (p.status) this.setStatus(p.status);
        if (p.status === "cancelling") this.activityText.textContent = "cancelling…";
        return;
      case "token.delta":
        return this.token(p);
      case "reasoning.delta":
        return this.reasoningDelta(p, false);
      case "reasoning.done":
        return this.reasoningDelta(p, true);
      case "progress": {
        if (p.steer) {
          // The user's guidance to the running run: a user entry at its
          // place by seq. Text that streams after it goes below it, in a
          // new part of the same message.
          for (const m of this.messages.values()) m.sealed = true;
          this.add(h("div", { class: "msg user steer", testid: "user-message", "data-kind": "steer" }, h("div", { class: "msg-label dim", text: "guidance" }), h("div", { class: "msg-text", text: p.steer })));
          return;
        }
        const tool = p.tool_call_id && this.tools.get(p.tool_call_id);
        if (tool) tool.progress(p.text || "");
        else this.activityText.textContent = p.text || "";
        return;
      }
      case "tool.started":
        return this.toolStarted(p);
      case "tool.updated": {
        const tool = this.tools.get(p.tool_call_id) || this.toolStarted({ tool_call_id: p.tool_call_id, name: "tool" });
        tool.output(p);
        return;
      }
      case "tool.done": {
        const tool = this.tools.get(p.tool_call_id) || this.toolStarted({ tool_call_id: p.tool_call_id, name: "tool" });
        tool.done(p);
        this.activityText.textContent = p.error ? "tool failed" : "working…";
        return;
      }
      case "approval.requested": {
        const card = new ApprovalCard(this, p);
        this.approvals.set(card.id, card);
        this.add(card.el);
        this.activityText.textContent = "waiting for your approval";
        if (this.status !== "cancelling") this.setStatus("awaiting_approval");
        return;
      }
      case "approval.resolved": {
        const card = this.approvals.get(p.approval_id);
        if (card) card.resolved(p);
        this.activityText.textContent = "working…";
        this.resume();
        return;
      }
      case "clarify.requested": {
        const card = new ClarifyCard(this, p);
        this.clarifies.set(card.id, card);
        this.add(card.el);
        this.activityText.textContent = "waiting for your answer";
        if (this.status !== "cancelling") this.setStatus("awaiting_clarify");
        return;
      }
      case "clarify.resolved": {
        const card = this.clarifies.get(p.clarify_id);
        if (card) card.resolved(p);
        this.activityText.textContent = "working…";
        this.resume();
        return;
      }
      case "title.updated":
        return;
      case "usage.updated":
      case "usage.final":
        this.usageEl.textContent = usageText(p);
        return;
      case "queue.updated":
        this.view.queue = p;
        if (p.depth > 0) this.note(`queue: ${p.depth} waiting${p.items && p.items.length ? ` — next: “${p.items[0].preview || p.items[0].id}”` : ""}`, "queue");
        return;
      case "goal.updated":
        this.view.goal = p;
        this.note(`goal ${p.state}${p.text ? `: ${p.text}` : ""}${p.reason ? ` (${p.reason})` : ""}`, "goal");
        return;
      case "done":
        return this.finish("completed", e, p);
      case "cancelled":
        return this.finish("cancelled", e, p);
      case "error":
        if (!e.terminal) {
          this.note(`${p.code || "error"}: ${p.message || ""}`, "warn");
          return;
        }
        return this.finish(p.code === "interrupted" ? "interrupted" : p.code === "timeout" ? "expired" : "failed", e, p);
      default:
        return; // unknown event types are allowed to appear
    }
  }

  // resume returns the run chip to running after a prompt is resolved,
  // unless another prompt still waits or the run is being cancelled.
  resume() {
    if (this.status === "cancelling") return;
    const waiting = (m) => [...m.values()].some((c) => c.el.dataset.state === "pending");
    if (waiting(this.approvals)) this.setStatus("awaiting_approval");
    else if (waiting(this.clarifies)) this.setStatus("awaiting_clarify");
    else this.setStatus("running");
  }

  started(e, p) {
    this.timeEl.textContent = fmtClock(e.created_at);
    const meta = [p.profile, p.model, p.provider, p.workspace && `in ${p.workspace}`, p.source && p.source !== "user" && `via ${p.source}`].filter(Boolean);
    this.metaEl.textContent = meta.join(" · ");
    const user = h("div", { class: "msg user", testid: "user-message" }, h("div", { class: "msg-text", text: p.message || "" }));
    this.stopCaret();
    this.body.prepend(user);
    this.activityText.textContent = "thinking…";
  }

  token(p) {
    const id = p.message_id || "_";
    let m = this.messages.get(id);
    if (!m || m.sealed) {
      const textEl = h("div", { class: "assistant-text md", testid: "assistant-text", "data-message-id": id, "data-part": m ? String(m.part + 1) : "0" });
      const el = h("div", { class: "msg assistant" }, textEl);
      // done: how much of raw is rendered for good; tail: the nodes of
      // the rest, replaced on the next render.
      m = { el, textEl, raw: "", done: 0, tail: [], plain: null, sealed: false, part: m ? m.part + 1 : 0 };
      this.messages.set(id, m);
      this.add(el);
    }
    if (p.text) {
      m.raw += p.text;
      this.view.dirtyText.add(m);
    }
    this.streamed = true;
    if (this.streamingEl !== m.textEl && !this.terminal) {
      this.stopCaret();
      this.streamingEl = m.textEl;
      m.textEl.classList.add("streaming");
    }
    this.activityText.textContent = "writing…";
  }

  reasoningDelta(p, done) {
    const id = p.block_id || "_";
    let r = this.reasoning.get(id);
    if (!r) {
      const text = document.createTextNode("");
      const label = h("span", { class: "reasoning-label", text: "Thinking…" });
      const el = h("details", { class: "reasoning", testid: "reasoning", "data-block-id": id, open: true }, h("summary", null, label), h("pre", { class: "reasoning-text" }, text));
      r = { el, text, label, touched: false, done: false };
      // A user's own toggle wins over the automatic collapse on done.
      el.querySelector("summary").addEventListener("click", () => (r.touched = true));
      this.reasoning.set(id, r);
      this.add(el);
      this.activityText.textContent = "thinking…";
    }
    const t = p.text || "";
    if (!done) {
      r.text.appendData(t);
    } else {
      // reasoning.done carries the full text or a last chunk.
      if (t && t.startsWith(r.text.data)) r.text.data = t;
      else if (t && !r.text.data.endsWith(t)) r.text.appendData(t);
      r.done = true;
      const words = r.text.data.trim().split(/\s+/).filter(Boolean).length;
      r.label.textContent = `Reasoning · ${words} word${words === 1 ? "" : "s"}`;
      r.el.classList.add("done");
      if (!r.touched) r.el.open = false;
    }
    this.streamed = true;
  }

  toolStarted(p) {
    const card = new ToolCard(p);
    this.tools.set(card.id, card);
    this.add(card.el);
    this.activityText.textContent = `running ${p.name || "tool"}…`;
    return card;
  }

  note(text, kind) {
    this.add(h("div", { class: `note note-${kind}`, testid: "note", "data-kind": kind, text }));
  }

  finish(state, e, p) {
    if (this.terminal) return;
    this.terminal = state;
    this.stopCaret();
    this.setStatus(state);
    this.el.classList.remove("active");
    for (const t of this.tools.values()) t.abandon(state);
    for (const c of this.approvals.values()) c.close(state);
    for (const c of this.clarifies.values()) c.close(state);
    if (p.usage) this.usageEl.textContent = usageText(p.usage);

    let icon;
    let title;
    let detail = "";
    switch (state) {
      case "completed":
        icon = "✓";
        title = "Completed";
        detail = p.usage ? usageText(p.usage) : "";
        break;
      case "cancelled":
        icon = "■";
        title = "Cancelled";
        detail = [p.partial ? "partial output above was kept" : "stopped before any output", p.reason && `reason: ${p.reason}`].filter(Boolean).join(" · ");
        break;
      case "interrupted":
        icon = "⚡";
        title = "Interrupted";
        detail = `${p.message || "the run's executor went away"} — this is the last journaled state${p.last_seq ? ` (seq ${p.last_seq})` : ""}; the run is no longer executing.`;
        break;
      case "expired":
        icon = "⏱";
        title = "Timed out";
        detail = p.message || "";
        break;
      default:
        icon = "✕";
        title = "Failed";
        detail = [p.code, p.message].filter(Boolean).join(": ");
    }
    const banner = h(
      "div",
      { class: `banner banner-${state}`, testid: "terminal-banner", "data-state": state, "data-code": p.code || null, role: "status" },
      h("span", { class: "banner-icon", "aria-hidden": "true", text: icon }),
      h("span", { class: "banner-title", text: title }),
      detail ? h("span", { class: "banner-detail", text: detail }) : null,
      h("span", { class: "banner-time dim", text: fmtClock(e.created_at) }),
    );
    this.body.append(banner);
  }
}

// renderMessage shows an assistant message's text: as Markdown, or as
// plain text (MAX_MARKDOWN; once plain, it stays plain). Markdown is rendered from m.done on: the
// blocks before it are final (renderMarkdownParts) and stay as they are,
// so a stream re-renders, and the page lays out again, only its last
// blocks.
function renderMessage(m) {
  const blank = Math.max(m.raw.lastIndexOf("\n\n"), m.raw.lastIndexOf("\n\r\n")); // the last blank line
  if (m.plain || m.raw.length > MAX_MARKDOWN_TOTAL || m.raw.length - blank > MAX_MARKDOWN) {
    renderPlain(m);
    return;
  }
  const { frag, cut, nodes } = renderMarkdownParts(m.raw.slice(m.done));
  const added = [...frag.childNodes];
  for (const n of m.tail) n.remove();
  m.textEl.append(frag);
  m.done += cut;
  m.tail = added.slice(nodes);
}

// renderPlain shows a message past MAX_MARKDOWN as plain text in blocks
// (.text-chunk) of about PLAIN_CHUNK characters, each cut after a newline
// where one is in its second half (else after a space), that the browser
// does not lay out while they are off screen (content-visibility: auto,
// style.css). One text node of a 600 KB answer cost its switch-to 340 ms
// of layout; blocks cost a screenful. Streaming changes only the last
// block; the earlier ones are sealed. A long line with no newline breaks
// where a block ends. m.plain: { done: the characters of the sealed
// blocks, last: the open block's text node }.
function renderPlain(m) {
  if (!m.plain) {
    m.textEl.classList.remove("md");
    m.textEl.classList.add("chunked");
    m.textEl.replaceChildren();
    m.plain = { done: 0, last: null };
  }
  const p = m.plain;
  for (;;) {
    const end = m.raw.length - p.done > PLAIN_CHUNK ? chunkEnd(m.raw, p.done) : m.raw.length;
    if (!p.last) {
      p.last = document.createTextNode("");
      m.textEl.append(h("div", { class: "text-chunk" }, p.last));
    }
    const text = m.raw.slice(p.done, end);
    if (p.last.data !== text) p.last.data = text;
    if (end === m.raw.length) return;
    p.done = end;
    p.last = null;
  }
}

// chunkEnd is where the block of s starting at from ends: after the last
// newline, else the last space, of its second half, else at PLAIN_CHUNK
// (not between the halves of a surrogate pair).
function chunkEnd(s, from) {
  const to = from + PLAIN_CHUNK;
  for (const sep of ["\n", " "]) {
    const i = s.lastIndexOf(sep, to - 1);
    if (i >= from + PLAIN_CHUNK / 2) return i + 1;
  }
  const c = s.charCodeAt(to - 1);
  return c >= 0xd800 && c <= 0xdbff ? to - 1 : to;
}

function usageText(u) {
  if (!u) return "";
  const parts = [];
  if (u.input_tokens || u.output_tokens) parts.push(`${fmtCount(u.input_tokens)} in · ${fmtCount(u.output_tokens)} out`);
  if (u.duration_ms) parts.push(fmtDuration(u.duration_ms));
  if (u.model) parts.push(u.model);
  return parts.join(" · ");
}
