// diff.mjs renders the CommonMark spec's examples (commonmark-spec) of the
// sections whose constructs the workbench's renderer supports with that
// renderer (the path in argv[2], static/markdown.js) and with markdown-it
// (its strict "commonmark" preset), writes both in one normal form and
// prints, as JSON, every example: its number, section, whether the two
// agree, both forms, and — when they differ — the reason the renderer is
// known to differ for examples of that kind (the features below), if any.
// web/markdown_test.go decides what passes.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const spec = require("commonmark-spec");
const MarkdownIt = require("markdown-it");

// A minimal DOM: the renderer uses createElement, createTextNode,
// createDocumentFragment and a few node methods.
class Node {
  constructor(type) {
    this.nodeType = type;
    this.childNodes = [];
    this.parentNode = null;
  }
  get firstChild() {
    return this.childNodes[0] || null;
  }
  append(...nodes) {
    for (const n of nodes) {
      if (n.nodeType === 11) {
        for (const c of [...n.childNodes]) this.append(c);
        n.childNodes = [];
      } else {
        if (n.parentNode) n.parentNode.childNodes.splice(n.parentNode.childNodes.indexOf(n), 1);
        n.parentNode = this;
        this.childNodes.push(n);
      }
    }
  }
  replaceChild(next, old) {
    const i = this.childNodes.indexOf(old);
    const add = next.nodeType === 11 ? next.childNodes.splice(0) : [next];
    for (const n of add) n.parentNode = this;
    this.childNodes.splice(i, 1, ...add);
    old.parentNode = null;
  }
  set textContent(v) {
    this.childNodes = [globalThis.document.createTextNode(String(v))];
  }
}
class Element extends Node {
  constructor(tag) {
    super(1);
    this.tagName = tag.toUpperCase();
    this.attributes = new Map();
    this.dataset = {};
  }
  set className(v) {
    this.attributes.set("class", v);
  }
  get className() {
    return this.attributes.get("class") || "";
  }
  setAttribute(k, v) {
    this.attributes.set(k, String(v));
  }
}
globalThis.document = {
  createElement: (tag) => new Element(tag),
  createTextNode: (data) => Object.assign(new Node(3), { data: String(data) }),
  createDocumentFragment: () => new Node(11),
};

const src = await readFile(process.argv[2], "utf8");
const { renderMarkdown } = await import(`data:text/javascript,${encodeURIComponent(src)}`);
const md = new MarkdownIt("commonmark");

const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

// ours writes the renderer's tree as HTML in the normal form: headings one
// level up (the renderer starts at h2 under the message), no wrapper of
// tables, only href, start and title attributes.
function ours(n) {
  if (n.nodeType === 3) return esc(n.data);
  const kids = n.childNodes.map(ours).join("");
  if (n.nodeType === 11) return kids;
  let tag = n.tagName.toLowerCase();
  if (tag === "div") return kids;
  if (/^h[2-6]$/.test(tag)) tag = `h${Number(tag[1]) - 1}`;
  const attrs = ["href", "start", "title"].filter((k) => n.attributes.has(k)).map((k) => ` ${k}="${esc(n.attributes.get(k))}"`).join("");
  return tag === "hr" ? "<hr />" : `<${tag}${attrs}>${kids}</${tag}>`;
}

// normal drops what is only layout: newlines at tag edges, code's language
// class, and the trailing newline of a code block.
function normal(html) {
  return html
    .replace(/ class="[^"]*"/g, "")
    .replace(/ href="([^"]*)"/g, (all, h) => {
      try {
        return ` href="${esc(new URL(h.replace(/&amp;/g, "&")).href)}"`; // one spelling of a URL
      } catch {
        return all;
      }
    })
    .replace(/>\n/g, ">")
    .replace(/\n</g, "<")
    .trim();
}

// FEATURES: kinds of input the renderer handles otherwise, on purpose (it
// renders model answers into the page, not documents, and never passes
// HTML or an unsafe URL through): an example that differs gets the first
// whose test matches its input as its reason. The reasons are a guide,
// found from the input; differences.json holds the list the test expects.
const FEATURES = [
  ["bare http(s) URLs become links (GFM's extended autolinks)", (m) => /(^|[\s(])https?:\/\/[^\s<>]/.test(m.replace(/<https?:[^>]*>/g, "")) && !/\]\(|<https?:/.test(m)],
  ["autolinks other than http(s) and mailto:, and the URL parser's spelling of a URL (a backslash is a slash), differ", (m) => /<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>|<[^\s<>@]+@[^\s<>]+>/.test(m)],
  ["raw HTML is shown as text, never passed through", (m) => /<\/?[A-Za-z][^>]*>|<!--|<\?|<![A-Z]|<!\[CDATA/.test(m)],
  ["entity and numeric character references are kept as typed, not decoded", (m) => /&(#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);/.test(m)],
  ["relative and other non-http(s)/mailto link destinations are refused by the allow-list: the link stays text", (m) => /\]\(\s*<?(?!https?:|mailto:)/.test(m)],
  ["reference links and link definitions are not supported", (m) => /\]\s*\[|^ {0,3}\[[^\]]+\]:/m.test(m) || /\[[^\]]*\](?!\()/.test(m)],
  ["hard line breaks (two spaces or a backslash before a newline) stay a newline", (m) => / {2,}\n|\\\n/.test(m)],
  ["tabs are not expanded to columns", (m) => m.includes("\t")],
  ["setext headings (text underlined with = or -) are not supported", (m) => /\n {0,3}(=+|-+) *(\n|$)/.test(m)],
  ["indented code blocks are not supported (fenced ones are)", (m) => /(^|\n)( {4}|\t)\S/.test(m)],
  ["link destinations and titles are a subset: no spaces in <…>, no nested brackets, no escapes", (m) => /\]\(/.test(m)],
  ["a loose list's items are not wrapped in paragraphs; list item indentation is simplified", (m) => /(^|\n) {0,3}([-+*]|\d{1,9}[.)])( |\n|$)/.test(m)],
  ["block quotes end at a line without > (no lazy continuation)", (m) => /(^|\n) {0,3}>/.test(m)],
  ["details of empty headings, fences and blank lines in block structure", (m) => /(^|\n) {0,3}(#{1,6}|`{3,}|~{3,})/.test(m)],
];

const SECTIONS = new Set(["Backslash escapes", "Code spans", "Emphasis and strong emphasis", "Autolinks", "Links", "Images", "Thematic breaks", "ATX headings", "Fenced code blocks", "Paragraphs", "Blank lines", "Block quotes", "List items", "Lists", "Textual content"]);

const out = [];
for (const ex of spec.tests) {
  if (!SECTIONS.has(ex.section)) continue;
  const markdown = ex.markdown.replace(/→/g, "\t");
  const root = new Element("div");
  root.append(renderMarkdown(markdown));
  const a = normal(ours(root).replace(/^<div>|<\/div>$/g, ""));
  const b = normal(md.render(markdown));
  const agree = a === b;
  const feature = agree ? undefined : FEATURES.find(([, t]) => t(markdown))?.[0];
  out.push({ number: ex.number, section: ex.section, agree, ours: a, markdown_it: b, markdown, feature });
}
process.stdout.write(JSON.stringify(out));
