// The monitor page: reads the gateway's API with the token in its own URL, follows the event
// stream, and never sends anything that changes a kernel (its token could not anyway). An
// execution's card is drawn by the shared renderer (execution_view.js), loaded before this.

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const BASE = location.pathname.replace(/\/loomgate\/monitor\/?$/, "");
const API = BASE + "/api/loomgate";
const PAGE_EXECUTIONS = 30;   // executions shown per kernel before "older"
const HEAD = 20, TAIL = 40;   // lines of each execution's output shown inline
const PAGER_LINES = 500;      // lines per page of the full-output view
const FOLLOW_MS = 250;        // changes are fetched at most this often (a printing cell's output)
const FOLLOW_LIMIT = 10;      // new cards drawn per batch; when cells run faster, "older" has the rest
const MAX_CARDS = 2 * PAGE_EXECUTIONS;  // cards kept on the page; "older" brings back the rest

const state = {
  kernels: new Map(),          // id -> kernel model
  selected: null,              // kernel id
  executions: new Map(),       // number -> execution (of the selected kernel)
  oldest: null,                // lowest number shown
  toolCallsSeen: 0,            // highest tool call id shown
  pager: null,                 // {kernel, number, total, first}
  showEnded: false,
};

const $ = (id) => document.getElementById(id);

async function get(path, params = {}) {
  const url = new URL(API + path, location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(key, value);
  }
  const headers = TOKEN ? { Authorization: "token " + TOKEN } : {};
  const response = await fetch(url, { headers, credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || body.error || response.statusText);
  return body;
}

// -- formatting -----------------------------------------------------------------------------

function ago(seconds) {
  if (seconds === null || seconds === undefined) return "never";
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return Math.round(s) + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}

// When the gateway stops a kernel nobody holds (its `stops_at`: its grace period's end), or "".
function stopsText(k) {
  if (k.stops_at === null || k.stops_at === undefined) return "";
  if (k.stops_at <= Date.now() / 1000) return "stopped once its cell ends";
  const at = new Date(k.stops_at * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return `stops at ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())} unless held again`;
}

// A memory limit as the person writes one: 4 GiB, 512 MiB.
function size(bytes) {
  const gib = bytes / 2 ** 30, mib = bytes / 2 ** 20;
  if (gib >= 1) return (Number.isInteger(gib) ? gib : gib.toFixed(1)) + " GiB";
  return (Number.isInteger(mib) ? mib : mib.toFixed(1)) + " MiB";
}

// A kernel's sandbox in a few words ("sandbox: strict (no network)"), and its rules for the
// tooltip; null for a kernel loomgate did not start under a profile.
function sandboxText(k) {
  const s = k.sandbox;
  if (!s) return null;
  return "sandbox: " + s.profile + (s.profile !== "none" && !s.network ? " (no network)" : "");
}

// A kernel's checkpoints in a few words ("checkpoints: clean, after-3"), and each one's state
// and memory for the tooltip; null for a kernel without any.
function checkpointsText(k) {
  const cs = k.checkpoints || [];
  return cs.length ? "checkpoints: " + cs.map((c) => c.name).join(", ") : null;
}

function checkpointsDetail(k) {
  return (k.checkpoints || []).map((c) =>
    `${c.name}: the state after In [${c.after}]` + (c.held === null ? "" : `, holds ${size(c.held)}`)).join("\n");
}

// What a fork was copied from ("forked from k@cp1, after In [3]"); null for any other kernel.
function forkText(k) {
  const f = k.forked_from;
  if (!f) return null;
  const origin = (f.name || f.kernel.slice(0, 8)) + (f.checkpoint ? "@" + f.checkpoint : "");
  return `forked from ${origin}, after In [${f.after}]`;
}

function sandboxRules(s) {
  if (s.profile === "none") return "not confined";
  return [
    "writable: " + [...s.writable, "its own /tmp"].join(", "),
    `hidden: ${s.hidden.length} path${s.hidden.length === 1 ? "" : "s"}`,
    "network: " + (s.network ? "on" : "off"),
    "memory: " + (s.memory === null ? "no limit" : size(s.memory)),
    "processes: " + (s.processes === null ? "no limit" : s.processes),
    s.mechanism ? "enforced by " + s.mechanism : null,
    s.lacks && s.lacks.length ? "this mechanism cannot give it: " + s.lacks.join("; ") : null,
  ].filter(Boolean).join("\n");
}

// -- kernels ----------------------------------------------------------------------------------

async function loadKernels() {
  const { kernels } = await get("/kernels", { all: state.showEnded ? "true" : null });
  state.kernels = new Map(kernels.map((k) => [k.id, k]));
  renderKernels();
  if (!state.selected || !state.kernels.has(state.selected)) {
    const wanted = location.hash.slice(1);
    const top = byActivity([...state.kernels.values()])[0];  // the top of the list shown
    const first = state.kernels.has(wanted) ? wanted : top ? top.id : null;
    if (first) await selectKernel(first);
  }
}

// Kernels as the list shows them: the most recently active first.
function byActivity(kernels) {
  return kernels.sort((a, b) => (b.last_activity || 0) - (a.last_activity || 0));
}

let shownKernels = "";

function renderKernels() {
  const list = $("kernels");
  const kernels = byActivity([...state.kernels.values()]);
  // Redrawn only when something it shows changed (activity is shown to the second).
  const shown = JSON.stringify([state.selected, Math.floor(Date.now() / 1000), kernels.map((k) =>
    [k.id, k.name, k.state, k.executions, k.held_by, Math.floor(k.last_activity || 0), sandboxText(k),
      stopsText(k), checkpointsDetail(k), forkText(k)])]);
  if (shown === shownKernels) return;
  shownKernels = shown;
  list.replaceChildren();
  if (!kernels.length) list.append(el("li", { class: "muted", text: "no kernels yet" }));
  for (const k of kernels) {
    const holders = k.held_by && k.held_by.length ? "held by " + k.held_by.join(", ") : "no holder";
    list.append(el("li", {
      class: k.id === state.selected ? "selected" : null, "data-kernel": k.id,
      onclick: () => selectKernel(k.id),
    },
      el("div", {}, el("span", { class: "name", text: k.name || k.id.slice(0, 8) }), " ",
        el("span", { class: "badge s-" + k.state, text: k.state.replace("_", " ") })),
      el("div", { class: "meta", text: `${k.kernel_spec || "?"} · ${k.lifetime === "persistent" ? "named" : "conversation"} · ${k.executions} executions` }),
      el("div", { class: "meta", text: [holders, `active ${ago(k.last_activity)}`, stopsText(k)].filter(Boolean).join(" · ") }),
      k.sandbox ? el("div", { class: "meta sandbox", text: sandboxText(k), title: sandboxRules(k.sandbox) }) : null,
      checkpointsText(k) ? el("div", { class: "meta checkpoints", text: checkpointsText(k), title: checkpointsDetail(k) }) : null,
      forkText(k) ? el("div", { class: "meta fork", text: forkText(k) }) : null));
  }
}

async function selectKernel(id) {
  state.selected = id;
  state.executions.clear();
  state.oldest = null;
  history.replaceState(null, "", location.pathname + location.search + "#" + id);
  const kernel = state.kernels.get(id);
  $("kernel-title").textContent = kernel ? (kernel.name || id.slice(0, 8)) : id;
  showDownload(id, kernel);
  $("executions").replaceChildren();
  $("search-results").hidden = true;
  renderKernels();
  await loadExecutions();
}

// The selected kernel's records as a notebook file (the token rides in the link: a download
// cannot send a header).
function showDownload(id, kernel) {
  const link = $("download");
  const query = TOKEN ? "?token=" + encodeURIComponent(TOKEN) : "";
  link.href = `${API}/kernels/${encodeURIComponent(id)}/notebook${query}`;
  link.download = ((kernel && kernel.name) || id.slice(0, 8)) + ".ipynb";
  link.hidden = false;
}

// -- executions -------------------------------------------------------------------------------

async function loadExecutions({ before = null, since = null } = {}) {
  const id = state.selected;
  if (!id) return;
  const { executions } = await get(`/kernels/${id}/executions`, {
    limit: PAGE_EXECUTIONS, head: HEAD, tail: TAIL, max_chars: 2000, before, since,
  });
  if (id !== state.selected) return;
  for (const execution of executions) showExecution(execution);
  if (executions.length && (state.oldest === null || executions[0].number < state.oldest)) {
    state.oldest = executions[0].number;
  }
  $("older").hidden = !(state.oldest > 1) || (before !== null && executions.length < PAGE_EXECUTIONS);
}

// Shows (or updates in place) one execution's card, newest first.

function showExecution(execution) {
  const known = state.executions.get(execution.number);
  const key = `x-${execution.number}`;
  const old = document.getElementById(key);
  if (old && known && FINAL.has(known.state) && known.state === execution.state &&
      known.note === execution.note && known.finished === execution.finished) return;  // unchanged
  state.executions.set(execution.number, execution);
  const card = renderExecution(execution, SOURCE);
  if (old) { old.replaceWith(card); return; }
  const container = $("executions");
  const after = [...container.children].find((node) => Number(node.dataset.number) < execution.number);
  container.insertBefore(card, after || null);
  if (container.children.length > MAX_CARDS) {
    dropBelow(Number(container.children[MAX_CARDS - 1].dataset.number));
  }
}

// Where the shared renderer (shared/views/execution_view.js) gets what a card shows.
const SOURCE = {
  rich: (number, index) => get(`/kernels/${state.selected}/executions/${number}/rich/${index}`),
  traceback: (number) => get(`/kernels/${state.selected}/executions/${number}/traceback`),
  openPager: (number, first) => openPager(number, first),
};

// Changes seen on the event stream are applied together, at most every FOLLOW_MS: a kernel that
// runs a hundred cells a second costs the page (and the gateway) one request per interval.
const pending = { numbers: new Set(), kernels: false, reload: false, timer: null };

function later(change) {
  change(pending);
  if (pending.timer === null) pending.timer = setTimeout(applyPending, FOLLOW_MS);
}

async function applyPending() {
  const numbers = [...pending.numbers];
  const { kernels, reload } = pending;
  Object.assign(pending, { numbers: new Set(), kernels: false, reload: false });
  try {
    if (reload) await loadKernels();
    else if (kernels) renderKernels();
    const id = state.selected;
    if (numbers.length && id) {
      const since = Math.min(...numbers) - 1;
      const { executions } = await get(`/kernels/${id}/executions`, {
        since, limit: FOLLOW_LIMIT, head: HEAD, tail: TAIL, max_chars: 2000,
      });
      if (id === state.selected) {
        if (executions.length && executions[0].number > since + 1) dropBelow(executions[0].number);
        for (const execution of executions) showExecution(execution);
      }
    }
  } catch (error) {
    /* the next change fetches again */
  } finally {
    pending.timer = null;
    if (pending.numbers.size || pending.kernels || pending.reload) later(() => {});
  }
}

// Removes the cards older than `number` (more cells ran than a page shows; "older" brings them).
function dropBelow(number) {
  for (const node of [...$("executions").children]) {
    if (Number(node.dataset.number) < number) { state.executions.delete(Number(node.dataset.number)); node.remove(); }
  }
  state.oldest = number;
  $("older").hidden = !(number > 1);
}

// -- the full output, a page at a time ------------------------------------------------------

async function openPager(number, first = 1) {
  state.pager = { kernel: state.selected, number, first, total: 0 };
  $("pager-title").textContent = `In [${number}]`;
  if (!$("pager").open) $("pager").showModal();
  await showPage(first);
}

async function showPage(first) {
  const p = state.pager;
  const read = await get(`/kernels/${p.kernel}/executions/${p.number}/streams/combined`, {
    lines: `${first}:${first + PAGER_LINES - 1}`, max_chars: 5000,
  });
  p.first = read.first || first;
  p.total = read.total;
  $("pager-range").textContent = read.lines.length
    ? `lines ${read.first}–${read.last} of ${read.total}` : `no lines (of ${read.total})`;
  const box = $("pager-lines");
  renderPage(box, read.lines);
  box.scrollTop = 0;
}

for (const button of document.querySelectorAll("[data-page]")) {
  button.addEventListener("click", () => {
    const p = state.pager;
    if (!p) return;
    const last = Math.max(1, p.total - PAGER_LINES + 1);
    const to = { first: 1, prev: Math.max(1, p.first - PAGER_LINES), next: Math.min(last, p.first + PAGER_LINES), last }[button.dataset.page];
    showPage(to);
  });
}

// -- search -----------------------------------------------------------------------------------

$("search").addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = $("query").value;
  const box = $("search-results");
  if (!query || !state.selected) { box.hidden = true; return; }
  box.hidden = false;
  box.replaceChildren(el("div", { class: "muted", text: "searching…" }));
  try {
    const result = await get(`/kernels/${state.selected}/search`, { query, execution: "all", context: 1, max_matches: 200 });
    box.replaceChildren(el("div", { class: "muted", text: `${result.matches} matches in ${result.searched} executions${result.truncated ? " (first ones shown)" : ""}` }));
    for (const group of result.groups) {
      const lines = group.lines.map((line) => el("div", { class: "l" }, el("span", { class: "n", text: line.n }),
        line.marker === "M" ? el("mark", { text: line.text }) : line.text));
      box.append(el("div", { class: "group output" },
        el("a", { href: "#", onclick: (e) => { e.preventDefault(); openPager(group.execution, Math.max(1, group.lines[0].n)); } }, `In [${group.execution}]`),
        ...lines));
    }
  } catch (error) {
    box.replaceChildren(el("div", { class: "note", text: error.message }));
  }
});

// -- tool calls -------------------------------------------------------------------------------

async function loadToolCalls() {
  const { tool_calls } = await get("/tool-calls", { since: state.toolCallsSeen, limit: 500 });
  for (const call of tool_calls) showToolCall(call);
}

// A summary laid out in columns (list_kernels' table): two lines or more with a gap of at
// least two spaces between words. Shown as it is laid out: monospace, unwrapped, scrolled.
function isTable(text) {
  return text.split("\n").filter((line) => /\S {2,}\S/.test(line)).length >= 2;
}

function showToolCall(call) {
  if (call.id <= state.toolCallsSeen) return;
  state.toolCallsSeen = call.id;
  const args = Object.entries(call.arguments).map(([k, v]) => `${k}=${v}`).join("\n");
  const item = el("li", { class: call.error ? "error" : null, "data-tool": call.tool, "data-call": call.id },
    el("div", {}, el("span", { class: "tool", text: call.tool }), " ",
      el("span", { class: "muted", text: `${elapsed(call.duration)} · ${call.conversation}${call.client ? " (" + call.client + ")" : ""}` })),
    args ? el("div", { class: "args", text: args }) : null,
    el("div", { class: isTable(call.summary) ? "summary table" : "summary", text: call.summary }));
  $("tool-calls").prepend(item);
  while ($("tool-calls").children.length > 500) $("tool-calls").lastChild.remove();
}

// -- live -------------------------------------------------------------------------------------

let source = null;
let everConnected = false;

function connect() {
  const url = new URL(API + "/events", location.origin);
  if (TOKEN) url.searchParams.set("token", TOKEN);
  source = new EventSource(url);
  source.addEventListener("hello", async () => {
    setLink("live", "live");
    const again = everConnected;
    everConnected = true;
    // Picks up what happened while the page was not listening (a gateway restart included).
    try {
      await loadKernels();
      if (again && state.selected) {
        const newest = Math.max(0, ...state.executions.keys());
        await loadExecutions({ since: Math.max(0, newest - 1) });
      }
      await loadToolCalls();
    } catch (error) {
      // The gateway went away meanwhile: the stream drops too, and its next hello catches up.
      if (source.readyState === EventSource.OPEN) throw error;
    }
  });
  source.addEventListener("kernel", (e) => {
    const event = JSON.parse(e.data);
    if (event.phase === "stopped" && !state.showEnded) state.kernels.delete(event.kernel_id);
    else state.kernels.set(event.kernel_id, event.kernel);
    later((p) => { p.kernels = true; });
    if (!state.selected) selectKernel(event.kernel_id);
  });
  source.addEventListener("holders", () => later((p) => { p.reload = true; }));
  source.addEventListener("execution", (e) => {
    const event = JSON.parse(e.data);
    const kernel = state.kernels.get(event.kernel_id);
    if (!kernel) later((p) => { p.reload = true; });
    else {
      kernel.last_activity = event.time;
      kernel.state = { running: "busy", awaiting_input: "awaiting_input" }[event.execution.state] || "idle";
      if (event.execution.number > (kernel.last_execution || 0)) {
        kernel.last_execution = event.execution.number;
        kernel.executions = Math.max(kernel.executions, event.execution.number);
      }
      later((p) => { p.kernels = true; });
    }
    if (!state.selected) selectKernel(event.kernel_id);
    else if (event.kernel_id === state.selected) later((p) => p.numbers.add(event.execution.number));
  });
  source.addEventListener("output", (e) => {
    const event = JSON.parse(e.data);
    if (event.kernel_id === state.selected) later((p) => p.numbers.add(event.number));
  });
  source.addEventListener("tool_call", (e) => showToolCall(JSON.parse(e.data).tool_call));
  source.onerror = () => {
    setLink("down", "reconnecting…");
    // The browser retries a dropped stream itself, but gives up on an HTTP error (a gateway
    // still starting): then this starts a new one.
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
  };
}

function setLink(state_, text) {
  const link = $("link");
  link.dataset.state = state_;
  link.textContent = text;
}

$("older").addEventListener("click", () => loadExecutions({ before: state.oldest }));
$("show-ended").addEventListener("change", (e) => { state.showEnded = e.target.checked; loadKernels(); });
$("gateway").textContent = location.host;
setInterval(renderKernels, 30000);  // "active … ago" ages
connect();
