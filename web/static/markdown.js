// markdown.js — a small, safe Markdown renderer for assistant text.
//
// It builds DOM nodes with createElement and text nodes only: no innerHTML,
// no HTML passthrough (raw HTML in the text shows as text), no attributes
// from the text but a link's href, and that only for http:, https: and
// mailto: URLs (and a link's title, as text). It handles what model
// answers use: fenced code blocks, headings, block quotes, ordered and
// unordered lists (nested by indentation), GFM tables, horizontal rules and
// paragraphs; inline code, strong, emphasis, strikethrough, links (with a
// "title", 'title' or (title)), images (shown as a link to the image with
// its alt text: nothing is loaded from a URL in the text) and bare URLs.
// Anything it does not recognise stays text. An unclosed code fence (a
// stream still arriving) runs to the end.

const MAX_DEPTH = 6; // nesting of quotes and lists
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( {0,12})([-*+]|\d{1,9}[.)])([ \t]+|$)/;
// A link or image: [text](url "title"), the title also in '…' or (…), the
// url also in <…>.
const LINK = /^\[([^\]\n]{0,500})\]\(\s*<?([^()\s<>]{1,2000}(?:\([^()\s]*\)[^()\s<>]*)?)>?(?:\s+(?:"([^"\n]*)"|'([^'\n]*)'|\(([^()\n]*)\)))?\s*\)/;
// A GFM table's delimiter row: | --- | :-: | --: |
const TABLE_DELIM = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const MAX_COLUMNS = 64;

// renderMarkdown returns a DocumentFragment of the rendered text.
export function renderMarkdown(text) {
  return renderMarkdownParts(text).frag;
}

// renderMarkdownParts renders text as renderMarkdown does, and says where
// text that is still growing may be cut: the blocks of text.slice(0, cut)
// are the first `nodes` nodes of frag, and appending to text never changes
// them, so a stream re-renders only text.slice(cut) (see transcript.js).
// A cut is the start of a top-level block that begins a line with no
// indent after a blank line: every block ends at a blank line there (a
// list goes on past one only into an indented line), and a fence is no
// longer open. No cut: 0.
export function renderMarkdownParts(text) {
  const frag = document.createDocumentFragment();
  const src = String(text);
  const lines = [];
  const offsets = []; // where each line starts in src
  const nl = /\r\n?|\n/g;
  let at = 0;
  for (let m; (m = nl.exec(src)); at = m.index + m[0].length) {
    offsets.push(at);
    lines.push(src.slice(at, m.index));
  }
  offsets.push(at);
  lines.push(src.slice(at));
  const starts = [];
  blocks(frag, lines, 0, starts);
  let cut = 0;
  let nodes = 0;
  for (let k = starts.length - 1; k >= 0; k--) {
    const { line, node } = starts[k];
    if (line > 0 && !lines[line - 1].trim() && /^\S/.test(lines[line])) {
      cut = offsets[line];
      nodes = node;
      break;
    }
  }
  return { frag, cut, nodes };
}

// safeHref returns the URL when it may be a link's href, else "".
export function safeHref(url) {
  const u = String(url).trim();
  if (!u || /[\s\u0000-\u001f\u007f]/.test(u)) return "";
  try {
    const parsed = new URL(u);
    return SAFE_SCHEMES.has(parsed.protocol) ? parsed.href : "";
  } catch {
    return "";
  }
}

function el(tag, cls) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  return e;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line) || ITEM.test(line);
}

// interrupts reports whether line ends a paragraph: it starts a block, but
// a list item only when it has text and, ordered, starts at 1 (so a "*"
// or "2." alone on a line in prose stays prose, as in CommonMark).
function interrupts(line) {
  const m = ITEM.exec(line);
  if (m && !FENCE.test(line) && !HR.test(line)) return line.slice(m[0].length).trim() !== "" && (!/\d/.test(m[2]) || parseInt(m[2], 10) === 1);
  return startsBlock(line);
}

// cells splits a table row at its unescaped pipes (a pipe inside a code
// span splits too, as in GFM; write \| to keep one).
function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const out = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && s[i + 1] === "|") {
      cur += "|";
      i++;
    } else if (s[i] === "|") {
      out.push(cur.trim());
      cur = "";
    } else cur += s[i];
  }
  out.push(cur.trim());
  return out;
}

// tableAt reports whether lines[i] starts a GFM table: a row with a pipe,
// then a delimiter row with as many columns.
function tableAt(lines, i) {
  const head = lines[i];
  const delim = lines[i + 1];
  if (delim === undefined || !head.includes("|") || !TABLE_DELIM.test(delim) || !delim.includes("-")) return false;
  const n = cells(head).length;
  return n === cells(delim).length && n <= MAX_COLUMNS && (n > 1 || /^\s*\|/.test(head));
}

// table renders the table at lines[i] and returns the index after it.
function table(parent, lines, i) {
  const head = cells(lines[i]);
  const align = cells(lines[i + 1]).map((d) => (d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : d.startsWith(":") ? "left" : ""));
  const row = (vals, tag) => {
    const tr = el("tr");
    for (let c = 0; c < head.length; c++) {
      const cell = el(tag, align[c] ? `md-align-${align[c]}` : "");
      inline(cell, vals[c] || "");
      tr.append(cell);
    }
    return tr;
  };
  const t = el("table", "md-table");
  const thead = el("thead");
  thead.append(row(head, "th"));
  t.append(thead);
  const tbody = el("tbody");
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|") && !startsBlock(lines[i])) tbody.append(row(cells(lines[i++]), "td"));
  if (tbody.childNodes.length) t.append(tbody);
  // A wide table scrolls inside its box, not the transcript.
  const wrap = el("div", "md-table-wrap");
  wrap.append(t);
  parent.append(wrap);
  return i;
}

// blocks renders lines into parent; starts, if given, gets the line and
// the parent's node count where each block begins.
function blocks(parent, lines, depth, starts) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    if (starts) starts.push({ line: i, node: parent.childNodes.length });
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
      const body = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (or past the end)
      const pre = el("pre", "md-code");
      const code = el("code");
      if (m[2]) code.dataset.lang = m[2].slice(0, 32);
      code.textContent = body.join("\n");
      pre.append(code);
      parent.append(pre);
      continue;
    }
    if ((m = HEADING.exec(line))) {
      const h = el(`h${Math.min(6, m[1].length + 1)}`, "md-h");
      inline(h, m[2] || "");
      parent.append(h);
      i++;
      continue;
    }
    if (HR.test(line) && !ITEM.test(line)) {
      parent.append(el("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ""));
      const q = el("blockquote");
      if (depth < MAX_DEPTH) blocks(q, inner, depth + 1);
      else q.append(document.createTextNode(inner.join("\n")));
      parent.append(q);
      continue;
    }
    if ((m = ITEM.exec(line))) {
      i = list(parent, lines, i, depth);
      continue;
    }
    if (tableAt(lines, i)) {
      i = table(parent, lines, i);
      continue;
    }
    // A paragraph: up to a blank line or the start of another block.
    const para = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !interrupts(lines[i]) && !tableAt(lines, i)) para.push(lines[i++]);
    const p = el("p");
    // A line's leading white space is not its text.
    inline(p, para.map((l) => l.replace(/^[ \t]+/, "")).join("\n"));
    parent.append(p);
  }
}

// list renders the list starting at lines[i] and returns the index after it.
function list(parent, lines, i, depth) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const listEl = el(ordered ? "ol" : "ul");
  if (ordered) {
    const start = parseInt(first[2], 10);
    if (start !== 1) listEl.setAttribute("start", String(start));
  }
  const items = [];
  let cur = null;
  while (i < lines.length) {
    const line = lines[i];
    const m = ITEM.exec(line);
    if (m && m[1].length <= indent + 1 && /\d/.test(m[2]) === ordered) {
      cur = { lines: [line.slice(m[0].length)], width: m[0].length };
      items.push(cur);
      i++;
      continue;
    }
    if (m && m[1].length <= indent + 1) break; // the other kind of list at this level
    if (m && m[1].length < indent) break; // a shallower list: not ours
    if (!line.trim()) {
      // A blank line ends the list unless the next line is indented into
      // the item.
      const next = lines[i + 1];
      if (next !== undefined && next.trim() && /^\s/.test(next) && (next.match(/^\s*/)[0].length > indent)) {
        cur.lines.push("");
        i++;
        continue;
      }
      break;
    }
    if (m || /^\s/.test(line)) {
      // Deeper: a nested list or a continuation, dedented into the item.
      const strip = Math.min(cur.width, line.match(/^\s*/)[0].length);
      cur.lines.push(line.slice(strip));
      i++;
      continue;
    }
    if (startsBlock(line)) break;
    cur.lines.push(line); // a lazy continuation of the item's text
    i++;
  }
  for (const it of items) {
    const li = el("li");
    const simple = it.lines.every((l) => !startsBlock(l) && l.trim() !== "" ) || depth >= MAX_DEPTH;
    if (simple) inline(li, it.lines.join("\n"));
    else {
      blocks(li, it.lines, depth + 1);
      // A tight item's single paragraph renders inline.
      if (li.childNodes.length >= 1 && li.firstChild.tagName === "P") li.replaceChild(unwrap(li.firstChild), li.firstChild);
    }
    listEl.append(li);
  }
  parent.append(listEl);
  return i;
}

function unwrap(p) {
  const frag = document.createDocumentFragment();
  while (p.firstChild) frag.append(p.firstChild);
  return frag;
}

// ---- inline Markdown, in time linear in the text ------------------------
//
// One pass left to right makes a list of items: text, finished nodes (code
// spans, links, images, autolinks) and the delimiter runs of *, _ and ~~,
// each also in a stack of delimiters. Emphasis and strikethrough are then
// matched as CommonMark's "process emphasis" does (its appendix), with its
// openers_bottom so that a closer never searches again below where a
// search for its kind failed; a match moves the items between opener and
// closer into an element (a list splice, no copy). Code spans find their
// closing backtick run through a table of every run made once. No step
// goes back over the text, so the work grows with the text, not its
// square.

// SPECIAL finds where an inline construct may start: an escape, a code
// span, emphasis, strikethrough, an image or link, an <autolink> or a bare
// URL. inline treats every other character as text.
const SPECIAL = /[\\`*_~!\[<]|https?:\/\//g;
const ASCII_PUNCT = /[!-\/:-@\[-`{-~]/;
const PUNCT = /[\p{P}\p{S}]/u;
const SPACE = /\s/;
const LINK_AT = new RegExp(LINK.source.slice(1), "y");
const URL_AT = /<?(https?:\/\/[^\s<>"]{0,2000}[^\s<>".,;:!?)\]'])>?/y;
// MAX_INLINE_DEPTH bounds nested inline elements; deeper ones show their
// text without an element.
const MAX_INLINE_DEPTH = 32;

// inline renders the inline Markdown of text into parent. noLinks: text
// inside a link (no link in a link).
function inline(parent, text, noLinks = false) {
  const head = { kind: "head", prev: null, next: null };
  let tail = head;
  let buf = "";
  const push = (item) => {
    if (buf) {
      const t = { kind: "text", s: buf, prev: tail, next: null };
      tail.next = t;
      tail = t;
      buf = "";
    }
    if (item) {
      item.prev = tail;
      item.next = null;
      tail.next = item;
      tail = item;
    }
  };
  // The delimiter stack, in text order.
  let firstDelim = null;
  let lastDelim = null;
  let ticks = null; // backtick runs, made at the first backtick
  let i = 0;
  while (i < text.length) {
    SPECIAL.lastIndex = i;
    const next = SPECIAL.exec(text);
    const j = next ? next.index : text.length;
    if (j > i) {
      buf += text.slice(i, j);
      i = j;
      if (i >= text.length) break;
    }
    const c = text[i];
    let m;
    if (c === "\\") {
      if (i + 1 < text.length && ASCII_PUNCT.test(text[i + 1])) {
        buf += text[i + 1];
        i += 2;
      } else {
        buf += c;
        i++;
      }
      continue;
    }
    if (c === "`") {
      let n = 1;
      while (text[i + n] === "`") n++;
      if (!ticks) ticks = backtickRuns(text);
      const end = ticks.next(n, i + n);
      if (end >= 0) {
        const code = el("code", "md-inline");
        let body = text.slice(i + n, end).replace(/\r\n?|\n/g, " ");
        if (body.length > 2 && body[0] === " " && body[body.length - 1] === " " && body.trim()) body = body.slice(1, -1);
        code.textContent = body;
        push({ kind: "node", node: code });
        i = end + n;
      } else {
        buf += text.slice(i, i + n);
        i += n;
      }
      continue;
    }
    if (c === "*" || c === "_" || c === "~") {
      let n = 1;
      while (text[i + n] === c) n++;
      if (c === "~" && n !== 2) {
        buf += text.slice(i, i + n); // strikethrough is ~~ only
        i += n;
        continue;
      }
      const before = i > 0 ? text[i - 1] : " ";
      const after = i + n < text.length ? text[i + n] : " ";
      const { open, close } = flanking(c, before, after);
      const item = { kind: "text", s: text.slice(i, i + n) };
      push(item);
      if (open || close) {
        const d = { ch: c, count: n, orig: n, open, close, item, prev: lastDelim, next: null };
        if (lastDelim) lastDelim.next = d;
        else firstDelim = d;
        lastDelim = d;
      }
      i += n;
      continue;
    }
    if (c === "!" && text[i + 1] === "[" && (LINK_AT.lastIndex = i + 1) && (m = LINK_AT.exec(text))) {
      // An image: a link to it, labelled with its alt text (the text never
      // makes the page load anything).
      const href = safeHref(m[2]);
      const alt = m[1] || "image";
      if (href) {
        const a = link(href, m[3] ?? m[4] ?? m[5]);
        a.className = "md-image";
        a.append(document.createTextNode(alt)); // the icon is CSS (a.md-image::before)
        push({ kind: "node", node: a });
      } else {
        buf += `[${alt}]`; // an unsafe URL: the alt text only
      }
      i += 1 + m[0].length;
      continue;
    }
    if (c === "[" && !noLinks && ((LINK_AT.lastIndex = i), (m = LINK_AT.exec(text))) && m[1]) {
      const href = safeHref(m[2]);
      if (href) {
        const a = link(href, m[3] ?? m[4] ?? m[5]);
        inline(a, m[1], true);
        push({ kind: "node", node: a });
      } else {
        buf += m[0]; // an unsafe or odd URL stays text
      }
      i += m[0].length; // (not LINK_AT.lastIndex: the link's text moved it)
      continue;
    }
    if ((c === "h" || c === "<") && (i === 0 || /[\s(]/.test(text[i - 1])) && ((URL_AT.lastIndex = i), (m = URL_AT.exec(text)))) {
      const href = noLinks ? "" : safeHref(m[1]);
      if (href && (c !== "<" || m[0].endsWith(">"))) {
        const a = link(href);
        a.textContent = m[1];
        push({ kind: "node", node: a });
        i += m[0].length;
        continue;
      }
    }
    buf += c;
    i++;
  }
  push(null);
  emphasis(firstDelim);
  build(parent, head.next);
}

// flanking says whether a delimiter run of c between the characters before
// and after it may open and close emphasis (CommonMark's left- and
// right-flanking runs; an underscore does not open or close inside a word).
function flanking(c, before, after) {
  const afterSpace = SPACE.test(after);
  const beforeSpace = SPACE.test(before);
  const afterPunct = PUNCT.test(after);
  const beforePunct = PUNCT.test(before);
  const left = !afterSpace && (!afterPunct || beforeSpace || beforePunct);
  const right = !beforeSpace && (!beforePunct || afterSpace || afterPunct);
  if (c === "_") return { open: left && (!right || beforePunct), close: right && (!left || afterPunct) };
  return { open: left, close: right };
}

// backtickRuns indexes the text's backtick runs by length: next(n, from)
// is where the first run of exactly n backticks at or after from starts
// (-1: none). Calls come with growing from, so each length's list is
// walked once.
function backtickRuns(text) {
  const byLen = new Map();
  for (let i = text.indexOf("`"); i >= 0; ) {
    let n = 1;
    while (text[i + n] === "`") n++;
    if (!byLen.has(n)) byLen.set(n, { at: [], k: 0 });
    byLen.get(n).at.push(i);
    i = text.indexOf("`", i + n);
  }
  return {
    next(n, from) {
      const r = byLen.get(n);
      if (!r) return -1;
      while (r.k < r.at.length && r.at[r.k] < from) r.k++;
      return r.k < r.at.length ? r.at[r.k] : -1;
    },
  };
}

// emphasis matches the delimiters from first on into em, strong and del
// elements: CommonMark's process emphasis (with its rule of three), and ~~
// for strikethrough, which pairs with ~~ only.
function emphasis(first) {
  const bottoms = new Map(); // kind of closer → the delimiter a search stops at
  const remove = (d) => {
    if (d.prev) d.prev.next = d.next;
    if (d.next) d.next.prev = d.prev;
  };
  let closer = first;
  while (closer) {
    if (!closer.close) {
      closer = closer.next;
      continue;
    }
    const key = `${closer.ch}${closer.open ? 1 : 0}${closer.orig % 3}`;
    const bottom = bottoms.has(key) ? bottoms.get(key) : null;
    let opener = closer.prev;
    for (; opener && opener !== bottom; opener = opener.prev) {
      if (opener.ch !== closer.ch || !opener.open) continue;
      const odd = closer.ch !== "~" && (opener.close || closer.open) && (opener.orig + closer.orig) % 3 === 0 && !(opener.orig % 3 === 0 && closer.orig % 3 === 0);
      if (!odd) break;
    }
    if (!opener || opener === bottom) {
      bottoms.set(key, closer.prev);
      const next = closer.next;
      if (!closer.open) remove(closer);
      closer = next;
      continue;
    }
    const n = closer.ch === "~" ? 2 : opener.count >= 2 && closer.count >= 2 ? 2 : 1;
    const tag = closer.ch === "~" ? "del" : n === 2 ? "strong" : "em";
    opener.count -= n;
    closer.count -= n;
    opener.item.s = opener.item.s.slice(n);
    closer.item.s = closer.item.s.slice(n);
    wrap(opener.item, closer.item, tag);
    opener.next = closer; // the delimiters between are text now
    closer.prev = opener;
    if (opener.count === 0) {
      unlink(opener.item);
      remove(opener);
    }
    if (closer.count === 0) {
      unlink(closer.item);
      const next = closer.next;
      remove(closer);
      closer = next;
    }
  }
}

// wrap moves the items strictly between a and b into a new element item.
function wrap(a, b, tag) {
  const e = { kind: "el", tag, first: null, prev: a, next: b };
  if (a.next !== b) {
    e.first = a.next;
    e.first.prev = null;
    b.prev.next = null;
  }
  a.next = e;
  b.prev = e;
}

function unlink(item) {
  item.prev.next = item.next;
  if (item.next) item.next.prev = item.prev;
}

// build appends the items from first on, and the elements' children, to
// parent, adjacent text in one node, without recursion (a deep nest of
// emphasis cannot overflow the stack).
function build(parent, first) {
  const stack = [];
  let par = parent;
  let it = first;
  let depth = 0;
  let text = "";
  const flush = () => {
    if (text) par.append(document.createTextNode(text));
    text = "";
  };
  for (;;) {
    for (; it; it = it.next) {
      if (it.kind === "text") text += it.s;
      else if (it.kind === "node") {
        flush();
        par.append(it.node);
      } else if (depth >= MAX_INLINE_DEPTH) {
        if (it.first) {
          stack.push({ it: it.next, par, depth });
          it = { next: it.first, kind: "text", s: "" };
        }
      } else {
        flush();
        const e = el(it.tag);
        par.append(e);
        if (it.first) {
          stack.push({ it: it.next, par, depth });
          par = e;
          depth++;
          it = { next: it.first, kind: "text", s: "" };
        }
      }
    }
    flush();
    if (!stack.length) return;
    ({ it, par, depth } = stack.pop());
  }
}

// link returns a link to a safe href that opens apart from the app, with
// an optional title (an attribute set as text: it cannot run anything).
function link(href, title) {
  const a = el("a");
  a.setAttribute("href", href);
  if (title) a.setAttribute("title", title.slice(0, 500));
  a.setAttribute("target", "_blank");
  a.setAttribute("rel", "noopener noreferrer nofollow");
  return a;
}
