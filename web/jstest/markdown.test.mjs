// Tests of static/markdown.js against a minimal DOM (the renderer needs
// only createElement, createTextNode, createDocumentFragment and a few node
// methods), run by `node --test` from TestClientJS.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

// ---- a minimal DOM ------------------------------------------------------

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
        if (n.parentNode) n.parentNode.childNodes = n.parentNode.childNodes.filter((c) => c !== n);
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
  get textContent() {
    return this.nodeType === 3 ? this.data : this.childNodes.map((c) => c.textContent).join("");
  }
  set textContent(v) {
    this.childNodes = [];
    this.append(globalThis.document.createTextNode(String(v)));
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
  getAttribute(k) {
    return this.attributes.has(k) ? this.attributes.get(k) : null;
  }
}
globalThis.document = {
  createElement: (tag) => new Element(tag),
  createTextNode: (data) => Object.assign(new Node(3), { data: String(data) }),
  createDocumentFragment: () => new Node(11),
};

const src = await readFile(new URL("../static/markdown.js", import.meta.url), "utf8");
const { renderMarkdown, renderMarkdownParts, safeHref } = await import(`data:text/javascript,${encodeURIComponent(src)}`);

function render(text) {
  const root = new Element("div");
  root.append(renderMarkdown(text));
  return root;
}
function* walk(n) {
  for (const c of n.childNodes) {
    if (c.nodeType === 1) {
      yield c;
      yield* walk(c);
    }
  }
}
const all = (root, tag) => [...walk(root)].filter((e) => e.tagName === tag);

const TAGS = new Set(["P", "H2", "H3", "H4", "H5", "H6", "PRE", "CODE", "UL", "OL", "LI", "BLOCKQUOTE", "HR", "STRONG", "EM", "DEL", "A", "DIV", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD"]);
const ATTRS = new Set(["class", "href", "target", "rel", "start", "title"]);

// checkSafe fails when the tree has an element or attribute the renderer
// must never make, or a link that is not http(s)/mailto.
function checkSafe(root, input) {
  for (const e of walk(root)) {
    assert.ok(TAGS.has(e.tagName), `element ${e.tagName} from ${JSON.stringify(input)}`);
    for (const k of e.attributes.keys()) assert.ok(ATTRS.has(k), `attribute ${k} from ${JSON.stringify(input)}`);
    if (e.tagName === "A") assert.match(e.getAttribute("href"), /^(https?:|mailto:)/, `href from ${JSON.stringify(input)}`);
  }
}

// ---- tests ----------------------------------------------------------------

test("raw HTML stays text", () => {
  const input = 'Hi <img src=x onerror="alert(1)"> <script>alert(2)</script> <a href="javascript:x">y</a> <b>b</b>';
  const root = render(input);
  checkSafe(root, input);
  assert.equal(all(root, "A").length, 0);
  assert.equal(root.textContent, input);
});

test("links: only http, https and mailto become links", () => {
  const bad = ["javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<script>x</script>", "vbscript:x", "file:///etc/passwd", "//evil.example/x", "/relative", "java\tscript:x"];
  for (const url of bad) {
    const input = `[x](${url})`;
    const root = render(input);
    checkSafe(root, input);
    assert.equal(all(root, "A").length, 0, url);
    assert.equal(safeHref(url), "", url);
  }
  const root = render("see [docs](https://example.com/a?b=1) or <https://x.example/y>, mail [me](mailto:me@example.com) and https://bare.example/p.");
  const links = all(root, "A");
  assert.deepEqual(links.map((a) => a.getAttribute("href")), ["https://example.com/a?b=1", "https://x.example/y", "mailto:me@example.com", "https://bare.example/p"]);
  for (const a of links) {
    assert.equal(a.getAttribute("target"), "_blank");
    assert.match(a.getAttribute("rel"), /noopener/);
  }
  assert.ok(root.textContent.endsWith("https://bare.example/p."), "the full stop is not part of the URL");
});

test("fenced code, open fences and inline code keep their text", () => {
  let root = render("before\n\n```js\nconst a = '<b>' && `x`;\n```\nafter `a<b>` and ``x ` y``");
  const pre = all(root, "PRE");
  assert.equal(pre.length, 1);
  assert.equal(pre[0].firstChild.tagName, "CODE");
  assert.equal(pre[0].firstChild.dataset.lang, "js");
  assert.equal(pre[0].textContent, "const a = '<b>' && `x`;");
  assert.deepEqual(all(root, "CODE").slice(1).map((c) => c.textContent), ["a<b>", "x ` y"]);
  root = render("```\nstill streaming\n- not a list");
  assert.equal(all(root, "PRE")[0].textContent, "still streaming\n- not a list");
  assert.equal(all(root, "UL").length, 0);
});

test("lists, nesting, ordered starts, quotes, headings, rules", () => {
  const root = render("# Title\n\n- a\n  - a1\n  - a2\n- b\n\n3. three\n4. four\n\n> quoted *text*\n\n---\n\ntext");
  assert.equal(all(root, "H2")[0].textContent, "Title");
  const uls = all(root, "UL");
  assert.equal(uls.length, 2);
  assert.equal(uls[0].childNodes.length, 2);
  assert.equal(uls[1].childNodes.map((li) => li.textContent).join("|"), "a1|a2");
  const ol = all(root, "OL")[0];
  assert.equal(ol.getAttribute("start"), "3");
  assert.equal(ol.childNodes.length, 2);
  assert.equal(all(root, "BLOCKQUOTE")[0].textContent, "quoted text");
  assert.equal(all(root, "EM")[0].textContent, "text");
  assert.equal(all(root, "HR").length, 1);
});

test("emphasis: strong, em, del; snake_case and lone stars stay text", () => {
  const root = render("**bold** *em* _also em_ ~~del~~ snake_case_name 2 * 3 * 4 a**b");
  assert.deepEqual(all(root, "STRONG").map((e) => e.textContent), ["bold"]);
  assert.deepEqual(all(root, "EM").map((e) => e.textContent), ["em", "also em"]);
  assert.deepEqual(all(root, "DEL").map((e) => e.textContent), ["del"]);
  assert.ok(root.textContent.includes("snake_case_name 2 * 3 * 4 a**b"));
});

test("plain text renders as itself", () => {
  const text = "w0 w1 w2 w3 ";
  assert.equal(render(text).textContent, text);
});

test("random input never throws and never makes an unsafe element", () => {
  const parts = ["*", "**", "_", "`", "```", "~~", "[", "]", "(", ")", "<", ">", "#", "- ", "1. ", "> ", "\n", "\n\n", "  ", "\\", "a", "word", "https://x.example/", "javascript:", "<img onerror=x>", "<script>", "](javascript:alert(1))", "](https://x.example/l)", "mailto:a@b", "![", "|", " | ", "\n|---|---|\n", ":-:", " \"t\"", " 'q'"];
  let seed = 42;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed % n;
  };
  for (let i = 0; i < 3000; i++) {
    let s = "";
    for (let j = rnd(40); j > 0; j--) s += parts[rnd(parts.length)];
    const root = render(s);
    checkSafe(root, s);
  }
});

test("images are links to the image labelled with the alt text; nothing loads", () => {
  const root = render('see ![a chart](https://x.example/c.png "the chart") and ![](https://x.example/p.png) and ![bad](javascript:alert(1))');
  const links = all(root, "A");
  assert.deepEqual(links.map((a) => [a.getAttribute("href"), a.textContent, a.getAttribute("title"), a.className]), [
    ["https://x.example/c.png", "a chart", "the chart", "md-image"],
    ["https://x.example/p.png", "image", null, "md-image"],
  ]);
  assert.ok(!root.textContent.includes("!"), "no stray !");
  assert.ok(root.textContent.includes("[bad]"), "an unsafe image keeps its alt text");
  assert.ok(!root.textContent.includes("javascript"));
  checkSafe(root, "images");
});

test("an image's or a URL's start inside a link's text does not lose the place", () => {
  const root = render("[x ![y](https://e.example/z) tail *e* and [a http://u](https://e.example/w) end");
  assert.deepEqual(all(root, "A").map((a) => [a.getAttribute("href"), a.textContent]), [["https://e.example/z", "x ![y"], ["https://e.example/w", "a http://u"]]);
  assert.equal(all(root, "EM")[0].textContent, "e");
  assert.ok(root.textContent.endsWith(" end"));
});

test("link titles in every form keep the link and become its title", () => {
  for (const [input, title] of [
    ['[docs](https://d.example/a "Read me")', "Read me"],
    ["[docs](https://d.example/a 'Read me')", "Read me"],
    ["[docs](https://d.example/a (Read me))", "Read me"],
    ['[docs](<https://d.example/a> "x <b>")', "x <b>"],
  ]) {
    const root = render(input);
    const a = all(root, "A");
    assert.equal(a.length, 1, input);
    assert.equal(a[0].getAttribute("href"), "https://d.example/a", input);
    assert.equal(a[0].getAttribute("title"), title, input);
    assert.equal(root.textContent, "docs", input);
  }
});

test("GFM tables: header, alignment, inline markdown in cells, escaped pipes; not a table stays text", () => {
  const root = render("Intro\n| Name | Score | Note |\n|:-----|:----:|-----:|\n| **a** | 1 | x \\| y |\n| `b` | 2 |\n\nafter");
  const tables = all(root, "TABLE");
  assert.equal(tables.length, 1);
  assert.deepEqual(all(root, "TH").map((c) => [c.textContent, c.className]), [["Name", "md-align-left"], ["Score", "md-align-center"], ["Note", "md-align-right"]]);
  const rows = all(root, "TR").slice(1).map((tr) => tr.childNodes.map((c) => c.textContent));
  assert.deepEqual(rows, [["a", "1", "x | y"], ["b", "2", ""]]);
  assert.equal(all(root, "STRONG")[0].textContent, "a");
  assert.equal(all(root, "P")[0].textContent, "Intro");
  assert.equal(all(root, "P")[1].textContent, "after");
  checkSafe(root, "table");
  // A pipe in prose, or a header and delimiter that do not match, is text.
  for (const text of ["a | b\nno delimiter", "| a | b |\n|---|\n| 1 | 2 |"]) {
    const r = render(text);
    assert.equal(all(r, "TABLE").length, 0, text);
  }
});

// serialize writes a tree as text: tags, attributes, data-* and text nodes.
function serialize(n) {
  if (n.nodeType === 3) return JSON.stringify(n.data);
  const kids = n.childNodes.map(serialize).join("");
  if (n.nodeType === 11) return kids;
  const attrs = [...n.attributes].map(([k, v]) => ` ${k}=${JSON.stringify(v)}`).join("");
  const data = Object.entries(n.dataset).map(([k, v]) => ` data-${k}=${JSON.stringify(v)}`).join("");
  return `<${n.tagName}${attrs}${data}>${kids}</${n.tagName}>`;
}

test("a stream rendered from its last cut on shows what the whole text renders", () => {
  // What transcript.js does with a message that grows: render the text
  // after the last cut, keep the nodes before the new cut, replace the rest.
  const parts = ["*", "**", "_", "`", "```", "~~~", "[", "]", "(", ")", "<", ">", "# ", "- ", "1. ", "2) ", "> ", "\n", "\n\n", "\n\n\n", "  ", "    ", "\t", "\\", "a", "word", "https://x.example/", "|", " | ", "\n|---|---|\n", "\r", "\r\n", "---", "x_y", "more text"];
  let seed = 11;
  const rnd = (n) => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return (seed >>> 8) % n;
  };
  let cuts = 0;
  for (let i = 0; i < 4000; i++) {
    const deltas = [];
    for (let j = rnd(30); j > 0; j--) {
      let d = "";
      for (let k = 1 + rnd(3); k > 0; k--) d += parts[rnd(parts.length)];
      deltas.push(d);
    }
    const kept = [];
    let tail = [];
    let raw = "";
    let done = 0;
    deltas.forEach((d, n) => {
      raw += d;
      if (n < deltas.length - 1 && rnd(3) === 0) return; // more than one delta in a frame
      const { frag, cut, nodes } = renderMarkdownParts(raw.slice(done));
      const added = [...frag.childNodes];
      assert.ok(nodes <= added.length && (cut > 0 || nodes === 0), JSON.stringify(raw));
      kept.push(...added.slice(0, nodes));
      tail = added.slice(nodes);
      done += cut;
      if (cut) cuts++;
    });
    const shown = kept.concat(tail).map(serialize).join("");
    assert.equal(shown, serialize(renderMarkdown(deltas.join(""))), JSON.stringify(deltas));
  }
  assert.ok(cuts > 1000, `only ${cuts} cuts: the inputs do not exercise them`);
});

test("cuts: after a blank line, at an unindented block start, never inside a fence or a list", () => {
  const cut = (s) => renderMarkdownParts(s).cut;
  assert.equal(cut("a\n\nb"), 3);
  assert.equal(cut("a\n\nb\n\nc"), 6);
  assert.equal(cut("a\r\n\r\nb"), 5);
  assert.equal(cut("just one paragraph\nstill it"), 0);
  assert.equal(cut("```\na\n\nb"), 0, "an open fence");
  assert.equal(cut("- a\n\n  more of a"), 0, "an indented line goes on with the item");
  assert.equal(cut("- a\n\nb"), 5);
  assert.equal(cut("```\na\n```\n\nb"), 11);
});

test("emphasis follows CommonMark's delimiter rules: nesting, rule of three, intraword, precedence", () => {
  const html = (s) => serialize(renderMarkdown(s)).replace(/^<P>|<\/P>$/g, "");
  assert.equal(html("***a** b*"), '<EM><STRONG>"a"</STRONG>" b"</EM>');
  assert.equal(html("*foo**bar**baz*"), '<EM>"foo"<STRONG>"bar"</STRONG>"baz"</EM>');
  assert.equal(html("*foo**bar*"), '<EM>"foo**bar"</EM>', "the rule of three");
  assert.equal(html("foo*bar*"), '"foo"<EM>"bar"</EM>', "a star opens inside a word");
  assert.equal(html("foo_bar_"), '"foo_bar_"', "an underscore does not");
  assert.equal(html("*a `*` b*"), '<EM>"a "<CODE class="md-inline">"*"</CODE>" b"</EM>', "a code span binds first");
  assert.equal(html("~~a ~~b~~ c~~"), '<DEL>"a "<DEL>"b"</DEL>" c"</DEL>');
  assert.equal(html("x ~~~a~~~ ~b~"), '"x ~~~a~~~ ~b~"', "strikethrough is ~~ only");
  assert.equal(html("**a *b** c*"), '<EM><EM>"a "<EM>"b"</EM></EM>" c"</EM>', "as markdown-it renders it");
});

test("inline work stays linear: the issue's inputs render whole, and deep nests are capped", () => {
  // The inputs, 40 KB of "**x " and 30 KB of "*x ": openers only
  // (no run closes), so all text; and the same with closers.
  for (const [unit, tag, n] of [["**x ", "STRONG", 0], ["*x ", "EM", 0], ["**x** ", "STRONG", 10000], ["*x* ", "EM", 10000], ["~~x~~ ", "DEL", 10000], ["`x` ", "CODE", 10000]]) {
    const text = unit.repeat(10000);
    const root = render(text);
    assert.equal(all(root, tag).length, n, unit);
    if (!n) assert.ok(root.textContent === text, `${unit}: the text is not whole`);
  }
  // 10,000 nested openers then closers: no stack overflow; at most 32
  // nested elements, the text whole.
  const deep = "*a ".repeat(10000) + "b" + " c*".repeat(10000);
  const d = render(deep);
  assert.ok(d.textContent.replace(/[* ]/g, "") === "a".repeat(10000) + "b" + "c".repeat(10000), "the deep nest's text is not whole");
  let depth = 0;
  for (let n = d.firstChild.firstChild; n && n.nodeType === 1; n = n.childNodes.find((c) => c.nodeType === 1)) depth++;
  assert.ok(depth <= 32, `nested ${depth} deep`);
});
