// markdown.js — a small, safe Markdown renderer for assistant text.
//
// It builds DOM nodes with createElement and text nodes only: no innerHTML,
// no HTML passthrough (raw HTML in the text shows as text), no attributes
// from the text but a link's href, and that only for http:, https: and
// mailto: URLs. It handles what model answers use: fenced code blocks,
// headings, block quotes, ordered and unordered lists (nested by
// indentation), horizontal rules and paragraphs; inline code, strong,
// emphasis, strikethrough, links and bare URLs. Anything it does not
// recognise stays text. An unclosed code fence (a stream still arriving)
// runs to the end.

const MAX_DEPTH = 6; // nesting of quotes and lists
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^( {0,12})([-*+]|\d{1,9}[.)])([ \t]+|$)/;

// renderMarkdown returns a DocumentFragment of the rendered text.
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  blocks(frag, String(text).replace(/\r\n?/g, "\n").split("\n"), 0);
  return frag;
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

// blocks renders lines into parent.
function blocks(parent, lines, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
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
    // A paragraph: up to a blank line or the start of another block.
    const para = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) para.push(lines[i++]);
    const p = el("p");
    inline(p, para.map((l) => l.replace(/^ {0,3}/, "")).join("\n"));
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

// inline renders the inline Markdown of text into parent.
function inline(parent, text, depth = 0) {
  let buf = "";
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    let m;
    if (c === "\\" && i + 1 < text.length && /[\\`*_{}[\]()#+\-.!~<>|]/.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const run = /^`+/.exec(rest)[0];
      const end = text.indexOf(run, i + run.length);
      if (end > i) {
        flush();
        const code = el("code", "md-inline");
        let body = text.slice(i + run.length, end);
        if (/^ .* $/.test(body)) body = body.slice(1, -1);
        code.textContent = body;
        parent.append(code);
        i = end + run.length;
        continue;
      }
      buf += run;
      i += run.length;
      continue;
    }
    if (depth < MAX_DEPTH && (m = /^(\*\*|__)(?=\S)([\s\S]*?\S)\1/.exec(rest)) && (c === "*" || boundary(text, i, m[0].length))) {
      flush();
      parent.append(span("strong", m[2], depth + 1));
      i += m[0].length;
      continue;
    }
    if (depth < MAX_DEPTH && (m = /^~~(?=\S)([\s\S]*?\S)~~/.exec(rest))) {
      flush();
      parent.append(span("del", m[1], depth + 1));
      i += m[0].length;
      continue;
    }
    if (depth < MAX_DEPTH && (m = /^([*_])(?=[^\s*_])([\s\S]*?[^\s\\])\1(?!\1)/.exec(rest)) && (c === "*" || boundary(text, i, m[0].length))) {
      flush();
      parent.append(span("em", m[2], depth + 1));
      i += m[0].length;
      continue;
    }
    if (c === "[" && (m = /^\[([^\]\n]{1,500})\]\(([^()\s]{1,2000}(?:\([^()\s]*\))?[^()\s]*)(?:\s+"[^"\n]*")?\)/.exec(rest))) {
      const href = safeHref(m[2]);
      if (href) {
        flush();
        const a = link(href);
        inline(a, m[1], MAX_DEPTH); // text only inside a link
        parent.append(a);
      } else {
        buf += m[0]; // an unsafe or odd URL stays text
      }
      i += m[0].length;
      continue;
    }
    if ((c === "h" || c === "<") && (m = /^<?(https?:\/\/[^\s<>"]+[^\s<>".,;:!?)\]'])>?/.exec(rest)) && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      const href = safeHref(m[1]);
      if (href && (c !== "<" || m[0].endsWith(">"))) {
        flush();
        const a = link(href);
        a.textContent = m[1];
        parent.append(a);
        i += m[0].length;
        continue;
      }
    }
    buf += c;
    i++;
  }
  flush();
}

// span returns a tag element holding the inline Markdown of text.
function span(tag, text, depth) {
  const s = el(tag);
  inline(s, text, depth);
  return s;
}

// link returns a link to a safe href that opens apart from the app.
function link(href) {
  const a = el("a");
  a.setAttribute("href", href);
  a.setAttribute("target", "_blank");
  a.setAttribute("rel", "noopener noreferrer nofollow");
  return a;
}

// boundary reports whether an underscore run at i..i+n is not inside a word
// (snake_case stays text).
function boundary(text, i, n) {
  const before = i > 0 ? text[i - 1] : " ";
  const after = i + n < text.length ? text[i + n] : " ";
  return !/\w/.test(before) && !/\w/.test(after);
}
