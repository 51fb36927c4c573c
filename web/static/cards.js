// cards.js — the transcript's cards: a tool call (arguments, streamed
// output, result), an approval prompt and a clarify question, each with its
// own controls. transcript.js places them in a run.

import { h, fmtDuration, pretty, oneLine } from "./dom.js";

// Tool output shown per card; output past it is dropped (with a note) so a
// chatty tool cannot grow the page without bound.
const MAX_TOOL_OUTPUT = 256 * 1024;

const APPROVAL_LABELS = {
  once: "Allow once",
  session: "Allow for session",
  always: "Always allow",
  deny: "Deny",
};

export class ToolCard {
  constructor(p) {
    this.id = p.tool_call_id || `t${Math.random()}`;
    this.size = 0;
    this.lastStream = null;
    this.lastText = null;
    this.statusEl = h("span", { class: "tool-status", testid: "tool-status", text: "running" });
    this.durationEl = h("span", { class: "tool-duration mono dim" });
    this.progressEl = h("div", { class: "tool-progress dim", hidden: true });
    this.outputEl = h("pre", { class: "tool-output", testid: "tool-output", hidden: true });
    this.resultPre = h("pre", { class: "tool-result-text" });
    this.resultEl = h("details", { class: "tool-result", hidden: true }, h("summary", { text: "result" }), this.resultPre);
    const args = p.args;
    const hasArgs = args !== undefined && args !== null && !(typeof args === "object" && Object.keys(args).length === 0);
    const head = h(
      "div",
      { class: "tool-head" },
      h("span", { class: "tool-icon", "aria-hidden": "true" }),
      h("span", { class: "tool-name", testid: "tool-name", text: p.name || "tool" }),
      hasArgs ? h("code", { class: "tool-args-preview", text: oneLine(args) }) : null,
      h("span", { class: "spacer" }),
      this.durationEl,
      this.statusEl,
    );
    head.addEventListener("click", () => this.el.classList.toggle("collapsed"));
    this.el = h(
      "div",
      { class: "tool", testid: "tool-card", "data-tool-call-id": this.id, "data-state": "running" },
      head,
      h(
        "div",
        { class: "tool-body" },
        this.progressEl,
        hasArgs ? h("details", { class: "tool-args" }, h("summary", { text: "arguments" }), h("pre", { text: pretty(args) })) : null,
        this.outputEl,
        this.resultEl,
      ),
    );
  }

  progress(text) {
    this.progressEl.hidden = !text;
    this.progressEl.textContent = text;
  }

  output(p) {
    const stream = p.stream || "stdout";
    let text = p.text;
    if (text === undefined || text === null) text = p.data !== undefined ? `${oneLine(p.data, 4000)}\n` : "";
    if (!text) return;
    if (this.size > MAX_TOOL_OUTPUT) return;
    this.size += text.length;
    if (this.size > MAX_TOOL_OUTPUT) text += "\n… output truncated in the browser\n";
    this.outputEl.hidden = false;
    if (this.lastStream === stream && this.lastText) {
      this.lastText.appendData(text);
    } else {
      this.lastText = document.createTextNode(text);
      this.outputEl.append(h("span", { class: `stream-${stream}` }, this.lastText));
      this.lastStream = stream;
    }
  }

  done(p) {
    const state = p.error ? "error" : "done";
    this.el.dataset.state = state;
    this.statusEl.textContent = p.status || state;
    if (p.duration_ms !== undefined) this.durationEl.textContent = fmtDuration(p.duration_ms);
    this.progress("");
    const r = p.result;
    if (r !== undefined && r !== null && r !== "") {
      this.resultPre.textContent = pretty(r);
      this.resultEl.hidden = false;
      if (p.error) this.resultEl.open = true;
    }
  }

  // abandon marks a card that never got its tool.done when the run ended.
  abandon(runState) {
    if (this.el.dataset.state !== "running") return;
    this.el.dataset.state = "abandoned";
    this.statusEl.textContent = runState === "completed" ? "no result" : runState;
  }
}

// PromptCard is what an approval and a clarify prompt share.
class PromptCard {
  // close ends a prompt still pending when its run ended.
  close(runState) {
    this.setActionable(false);
    if (this.el.dataset.state !== "pending") return;
    this.el.dataset.state = "closed";
    this.waitEl.hidden = true;
    this.resultEl.hidden = false;
    this.resultEl.textContent = `not answered — run ${runState}`;
  }
}

export class ApprovalCard extends PromptCard {
  constructor(run, p) {
    super();
    this.run = run;
    this.id = p.approval_id;
    this.sending = false;
    this.buttons = (p.choices && p.choices.length ? p.choices : ["once", "deny"]).map((choice) =>
      h("button", {
        type: "button",
        class: `btn btn-small ${choice === "deny" ? "btn-danger-ghost" : "btn-approve"}`,
        testid: "approval-choice",
        "data-choice": choice,
        text: APPROVAL_LABELS[choice] || choice,
        onclick: () => this.choose(choice),
      }),
    );
    this.choicesEl = h("div", { class: "choices", hidden: true }, this.buttons);
    this.waitEl = h("div", { class: "card-wait dim", text: "waiting for the hub…" });
    this.resultEl = h("div", { class: "card-result", hidden: true });
    this.el = h(
      "div",
      { class: "card approval", testid: "approval-card", "data-approval-id": this.id, "data-state": "pending" },
      h("div", { class: "card-title" }, h("span", { text: "Approval needed" }), p.risk ? h("span", { class: `risk risk-${p.risk}`, text: p.risk }) : null),
      h("div", { class: "card-summary", text: p.summary || "" }),
      this.choicesEl,
      this.waitEl,
      this.resultEl,
    );
  }

  setActionable(on) {
    if (this.el.dataset.state !== "pending") on = false;
    this.choicesEl.hidden = !on;
    this.waitEl.hidden = on || this.el.dataset.state !== "pending";
  }

  async choose(choice) {
    if (this.sending) return;
    this.sending = true;
    for (const b of this.buttons) b.disabled = true;
    try {
      await this.run.view.ctx.approve(this.run, this, choice);
    } finally {
      this.sending = false;
      if (this.el.dataset.state === "pending") for (const b of this.buttons) b.disabled = false;
    }
  }

  resolved(p) {
    this.el.dataset.state = p.status || "resolved";
    this.el.dataset.choice = p.choice || "";
    this.choicesEl.hidden = true;
    this.waitEl.hidden = true;
    this.resultEl.hidden = false;
    const label = APPROVAL_LABELS[p.choice] || p.choice || "";
    this.resultEl.textContent = p.status && p.status !== "resolved" ? `${p.status}${label ? ` · ${label}` : ""}` : `→ ${label}`;
    this.el.classList.toggle("denied", p.choice === "deny");
  }
}

export class ClarifyCard extends PromptCard {
  constructor(run, p) {
    super();
    this.run = run;
    this.id = p.clarify_id;
    this.sending = false;
    const choices = p.choices || [];
    this.buttons = choices.map((c) =>
      h("button", { type: "button", class: "btn btn-small btn-approve", testid: "clarify-choice", "data-choice": c, text: c, onclick: () => this.answer(c) }),
    );
    // Free text is always possible; with choices it is the "other" answer.
    this.input = h("input", { type: "text", testid: "clarify-input", placeholder: choices.length ? "…or type another answer" : "Your answer…" });
    this.submit = h("button", { type: "submit", class: "btn btn-small btn-primary", testid: "clarify-submit", text: "Answer" });
    this.form = h("form", { class: "clarify-form" }, this.input, this.submit);
    this.form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const v = this.input.value.trim();
      if (v) this.answer(v);
    });
    this.controls = h("div", { class: "clarify-controls", hidden: true }, choices.length ? h("div", { class: "choices" }, this.buttons) : null, this.form);
    this.waitEl = h("div", { class: "card-wait dim", text: "waiting for the hub…" });
    this.resultEl = h("div", { class: "card-result", hidden: true });
    this.el = h(
      "div",
      { class: "card clarify", testid: "clarify-card", "data-clarify-id": this.id, "data-state": "pending" },
      h("div", { class: "card-title" }, h("span", { text: "Question" })),
      h("div", { class: "card-summary", text: p.question || "" }),
      this.controls,
      this.waitEl,
      this.resultEl,
    );
    this.sentResponse = "";
  }

  setActionable(on) {
    if (this.el.dataset.state !== "pending") on = false;
    this.controls.hidden = !on;
    this.waitEl.hidden = on || this.el.dataset.state !== "pending";
  }

  async answer(response) {
    if (this.sending) return;
    this.sending = true;
    this.sentResponse = response;
    const all = [...this.buttons, this.input, this.submit];
    for (const b of all) b.disabled = true;
    try {
      await this.run.view.ctx.clarify(this.run, this, response);
    } finally {
      this.sending = false;
      if (this.el.dataset.state === "pending") for (const b of all) b.disabled = false;
    }
  }

  resolved(p) {
    this.el.dataset.state = p.status || "resolved";
    this.controls.hidden = true;
    this.waitEl.hidden = true;
    this.resultEl.hidden = false;
    const resp = p.response || this.sentResponse;
    this.resultEl.textContent = p.status && p.status !== "resolved" ? p.status : `→ ${resp || "answered"}`;
  }
}
