// The execution renderer both the monitor page and the MCP Apps view load: one execution (the
// gateway's wire shape) as a card of DOM nodes. It never parses text as HTML in the page: text
// goes in as text nodes, HTML outputs are rebuilt from an allowlist (no script, handler, frame,
// style or URL survives). Where the data comes from is the caller's `source`:
//   source.rich(number, index) -> Promise<bundle>    one rich output's MIME bundle
//   source.traceback(number)   -> Promise<{text}>    the traceback with the kernel's colours
//   source.openPager(number, first)                  show all output, from line `first`
"use strict";

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

function elapsed(seconds) {
  if (seconds < 1) return Math.round(seconds * 1000) + " ms";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
}

// The local time of day, hh:mm:ss. Not toLocaleTimeString: its first call in a page sets up the
// locale's formats, which costs more than the rest of a first paint.
function timeOfDay(seconds) {
  const d = new Date(seconds * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

function submitter(execution) {
  if (execution.client) return execution.client;
  return execution.source === "loomgate" ? "loomgate" : "another Jupyter client";
}

const KEYWORDS = new Set(("False None True and as assert async await break class continue def del " +
  "elif else except finally for from global if import in is lambda nonlocal not or pass raise " +
  "return try while with yield match case print len range self").split(" "));
const TOKENS = /(#[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|[rbfuRBFU]{0,2}"(?:\\.|[^"\\\n])*"|[rbfuRBFU]{0,2}'(?:\\.|[^'\\\n])*')|(\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?j?\b)|([A-Za-z_]\w*)(?=\s*\()|([A-Za-z_]\w*)/g;

// Returns a fragment of the Python `code` with comments, strings, numbers, keywords and calls
// in their own spans (a tokenizer of regular expressions: good enough to read by).
function highlight(code) {
  const out = document.createDocumentFragment();
  let last = 0;
  for (const m of code.matchAll(TOKENS)) {
    if (m.index > last) out.append(code.slice(last, m.index));
    let cls = null;
    if (m[1]) cls = "com";
    else if (m[2]) cls = "str";
    else if (m[3]) cls = "num";
    else if (m[4]) cls = KEYWORDS.has(m[4]) ? "kw" : "fn";
    else if (m[5] && KEYWORDS.has(m[5])) cls = "kw";
    out.append(cls ? el("span", { class: cls, text: m[0] }) : m[0]);
    last = m.index + m[0].length;
  }
  out.append(code.slice(last));
  return out;
}

const ANSI_COLOURS = ["#000000", "#cd3131", "#0dbc79", "#b58900", "#2472c8", "#bc3fbc", "#11a8cd", "#a0a0a0"];
const ANSI_BRIGHT = ["#666666", "#f14c4c", "#23d18b", "#d7ba7d", "#3b8eea", "#d670d6", "#29b8db", "#e5e5e5"];

function colour256(n) {
  if (n < 8) return ANSI_COLOURS[n];
  if (n < 16) return ANSI_BRIGHT[n - 8];
  if (n < 232) {
    const v = [0, 95, 135, 175, 215, 255], i = n - 16;
    return `rgb(${v[Math.floor(i / 36)]},${v[Math.floor(i / 6) % 6]},${v[i % 6]})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

// Returns a fragment of `text` with its ANSI SGR colours as styled spans (other escapes dropped).
function ansi(text) {
  const out = document.createDocumentFragment();
  let style = {};
  const parts = text.split(/\x1b\[([0-9;]*)([A-Za-z])/);
  for (let i = 0; i < parts.length; i += 3) {
    if (parts[i]) {
      const css = Object.entries(style).map(([k, v]) => `${k}:${v}`).join(";");
      out.append(css ? el("span", { style: css, text: parts[i] }) : parts[i]);
    }
    if (i + 2 >= parts.length || parts[i + 2] !== "m") continue;
    const codes = (parts[i + 1] || "0").split(";").map(Number);
    for (let j = 0; j < codes.length; j++) {
      const c = codes[j];
      if (c === 0) style = {};
      else if (c === 1) style["font-weight"] = "bold";
      else if (c === 22) delete style["font-weight"];
      else if (c === 3) style["font-style"] = "italic";
      else if (c === 4) style["text-decoration"] = "underline";
      else if (c >= 30 && c <= 37) style.color = ANSI_COLOURS[c - 30];
      else if (c >= 90 && c <= 97) style.color = ANSI_BRIGHT[c - 90];
      else if (c >= 40 && c <= 47) style.background = ANSI_COLOURS[c - 40];
      else if (c >= 100 && c <= 107) style.background = ANSI_BRIGHT[c - 100];
      else if (c === 39) delete style.color;
      else if (c === 49) delete style.background;
      else if ((c === 38 || c === 48) && codes[j + 1] === 5) {
        style[c === 38 ? "color" : "background"] = colour256(codes[j + 2] || 0); j += 2;
      } else if ((c === 38 || c === 48) && codes[j + 1] === 2) {
        style[c === 38 ? "color" : "background"] = `rgb(${codes[j + 2] || 0},${codes[j + 3] || 0},${codes[j + 4] || 0})`; j += 4;
      }
    }
  }
  return out;
}

// A line as a terminal shows it: after a carriage return only the last frame (a progress bar).
function lastFrame(text) {
  const at = text.lastIndexOf("\r");
  return at < 0 ? text : text.slice(at + 1);
}

// -- HTML outputs (tables), rebuilt from an allowlist ---------------------------------------

const HTML_TAGS = new Set(("table thead tbody tfoot tr th td caption colgroup col div span p b i " +
  "strong em u s small sub sup br hr code pre ul ol li dl dt dd h1 h2 h3 h4 h5 h6 blockquote").split(" "));
const HTML_ATTRIBUTES = new Set(["colspan", "rowspan", "align", "class"]);
const HTML_DROPPED = new Set(["script", "style", "iframe", "frame", "object", "embed", "template",
  "noscript", "svg", "math", "link", "meta", "title", "head"]);

// Returns the nodes of the HTML `markup` that are safe in the page: allowed elements with
// allowed attributes, text as text; anything else is unwrapped (its text kept) or, for scripts,
// styles and frames, dropped with its content. DOMParser's document is inert (nothing runs).
function safeHtml(markup) {
  const parsed = new DOMParser().parseFromString(String(markup), "text/html");
  const copy = (from, to) => {
    for (const node of from.childNodes) {
      if (node.nodeType === Node.TEXT_NODE) { to.append(node.data); continue; }
      if (node.nodeType !== Node.ELEMENT_NODE) continue;
      const tag = node.localName;
      if (HTML_DROPPED.has(tag)) continue;
      if (!HTML_TAGS.has(tag)) { copy(node, to); continue; }
      const made = document.createElement(tag);
      for (const attr of node.attributes) {
        if (HTML_ATTRIBUTES.has(attr.name) && /^[\w .,-]*$/.test(attr.value)) made.setAttribute(attr.name, attr.value);
      }
      copy(node, made);
      to.append(made);
    }
  };
  const box = el("div", { class: "html-output" });
  copy(parsed.body, box);
  return box;
}

function joined(data) {
  return Array.isArray(data) ? data.join("") : String(data);
}

// -- one execution ----------------------------------------------------------------------------

const FINAL = new Set(["completed", "error", "interrupted", "killed", "died", "lost"]);

function renderExecution(x, source) {
  const card = el("article", { class: "execution", id: `x-${x.number}`, "data-number": x.number, "data-state": x.state });
  const full = el("a", { href: "#", class: "show-all", onclick: (e) => { e.preventDefault(); source.openPager(x.number); } }, "full output");
  card.append(el("header", {},
    el("span", { class: "prompt", text: `In [${x.number}]` }),
    el("span", { class: "badge s-" + x.state, text: x.state.replace("_", " ") }),
    el("span", { class: "muted", text: submitter(x) }),
    el("span", { class: "right" },
      el("span", { class: "muted elapsed", text: elapsed(x.elapsed) }),
      el("span", { class: "muted started", text: timeOfDay(x.started) }),
      full)));
  card.append(el("pre", { class: "code" }, highlight(x.code)));
  const notes = [x.note, x.died && `died: ${x.died.reason}`, x.input && `waiting for input: ${x.input.prompt}`,
    x.unstored && `output not stored from line ${x.unstored.from_line}: ${x.unstored.reason}`].filter(Boolean);
  for (const note of notes) card.append(el("div", { class: "note", text: note }));
  const output = el("div", { class: "output", "data-total": x.output ? x.output.total : 0 });
  if (x.output) renderLines(output, x, [...x.output.head], x.output.omitted, [...x.output.tail], source);
  card.append(output);
  if (x.error) colourTraceback(x, output, source);
  if (x.state === "running" || x.state === "awaiting_input") output.scrollTop = output.scrollHeight;
  return card;
}

function renderLines(box, x, head, omitted, tail, source) {
  box.replaceChildren();
  const richByLine = new Map((x.rich || []).map((r) => [r.line, r]));
  let shownRich = null;  // the kind of the block a rich output stands for: its text lines are skipped
  const addLine = (line) => {
    if (shownRich && !line.start && line.kind === shownRich) return;
    shownRich = null;
    const rich = line.start ? richByLine.get(line.n) : null;
    const out = line.kind === "result" && line.start ? el("span", { class: "out", text: `Out[${x.number}]: ` }) : null;
    if (rich && rich.mimetypes.some((m) => m.startsWith("image/") || m === "text/html")) {
      if (out) box.append(el("div", { class: "l", "data-kind": "result", "data-n": line.n }, el("span", { class: "n", text: line.n }), out));
      box.append(richPlaceholder(x, rich, line, source));
      shownRich = line.kind;
      return;
    }
    box.append(el("div", { class: "l", "data-kind": line.kind || "stdout", "data-n": line.n },
      el("span", { class: "n", text: line.n }), out, lastFrame(line.text)));
  };
  head.forEach(addLine);
  if (omitted) {
    box.append(el("div", { class: "omitted" }, `… ${omitted} lines not shown — `,
      el("a", { href: "#", onclick: (e) => { e.preventDefault(); source.openPager(x.number, head.length + 1); } }, "page through them"), " …"));
  }
  shownRich = null;
  tail.forEach(addLine);
}

// An image or an HTML output, filled in once its bundle arrives.
function richPlaceholder(x, rich, line, source) {
  const image = rich.mimetypes.find((m) => m.startsWith("image/"));
  if (image) {
    const img = el("img", { alt: line.text, "data-rich": rich.index });
    loadRich(x.number, rich, source, (bundle) => {
      const data = bundle.data[image];
      img.src = image === "image/svg+xml"
        ? "data:image/svg+xml;charset=utf-8," + encodeURIComponent(joined(data))
        : `data:${image};base64,${String(data).replace(/\s/g, "")}`;
    }, img);
    return img;
  }
  const holder = el("div", { class: "html-output", "data-rich": rich.index, text: line.text });
  loadRich(x.number, rich, source, (bundle) => {
    const made = safeHtml(joined(bundle.data["text/html"]));
    made.dataset.rich = rich.index;
    holder.replaceWith(made);
  }, holder);
  return holder;
}

async function loadRich(number, rich, source, show, node) {
  try {
    show(await source.rich(number, rich.index));
  } catch (error) {
    node.replaceWith(el("div", { class: "l muted", text: `[output not loaded: ${error.message}]` }));
  }
}

// Replaces the plain traceback lines of `x` with the kernel's coloured traceback.
async function colourTraceback(x, box, source) {
  const errorLines = [...box.querySelectorAll('.l[data-kind="error"]')];
  if (!errorLines.length) return;
  try {
    const { text } = await source.traceback(x.number);
    const block = el("pre", { class: "l", "data-kind": "error" }, ansi(text));
    errorLines[0].before(block);
    for (const line of errorLines) line.remove();
  } catch (error) { /* the plain lines stay */ }
}

// One page of lines of the full output (the pager of both pages).
function renderPage(box, lines) {
  box.replaceChildren(...lines.map((line) =>
    el("div", { class: "l", "data-kind": line.kind || "stdout", "data-n": line.n }, el("span", { class: "n", text: line.n }), lastFrame(line.text))));
}
