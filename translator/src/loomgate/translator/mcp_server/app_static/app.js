// The MCP Apps view of one execution: speaks the Apps protocol (JSON-RPC over postMessage with
// the host), learns the execution from the tool's result, reads it through the app-only tools
// (view_*) and draws it with the shared renderer (execution_view.js, loaded before this). What
// the person types into input() goes to view_send_input and nowhere else.

const PROTOCOL = "2026-01-26";
const FOLLOW_MS = 300;        // a running execution is read again this often
const HEAD = 20, TAIL = 40;   // lines shown inline
const PAGER_LINES = 500;      // lines per page of "show all output"

const view = {
  target: null,     // {kernel, execution} the tool's result names
  shown: null,      // the execution drawn last
  timer: null,
  reading: false,   // a view_execution call is under way
  again: false,     // and another was asked for meanwhile
  pager: null,      // {first, total}
  rich: new Map(),  // "number/index" -> bundle (drawn again without asking again)
  tracebacks: new Map(),
};

const $ = (id) => document.getElementById(id);

// -- the host ---------------------------------------------------------------------------------

const rpc = { next: 1, pending: new Map() };

function send(message) {
  window.parent.postMessage({ jsonrpc: "2.0", ...message }, "*");
}

function request(method, params) {
  const id = rpc.next++;
  return new Promise((resolve, reject) => {
    rpc.pending.set(id, { resolve, reject });
    send({ id, method, params });
  });
}

function notify(method, params) {
  send({ method, params });
}

window.addEventListener("message", (event) => {
  if (event.source !== window.parent) return;
  const message = event.data;
  if (!message || message.jsonrpc !== "2.0") return;
  if (message.method === undefined && message.id !== undefined) {
    const waiting = rpc.pending.get(message.id);
    if (!waiting) return;
    rpc.pending.delete(message.id);
    if (message.error) waiting.reject(new Error(message.error.message || "the host refused"));
    else waiting.resolve(message.result);
    return;
  }
  if (message.id !== undefined) {  // a request of the host's: ping, teardown
    if (message.method === "ui/resource-teardown") stopFollowing();
    send({ id: message.id, result: {} });
    return;
  }
  const params = message.params || {};
  if (message.method === "ui/notifications/tool-input") fromInput(params.arguments || {});
  else if (message.method === "ui/notifications/tool-result") fromResult(params);
  else if (message.method === "ui/notifications/host-context-changed") applyContext(params);
  else if (message.method === "ui/notifications/tool-cancelled") setStatus("the tool call was cancelled");
});

async function callTool(name, args) {
  const result = await request("tools/call", { name, arguments: args });
  if (result.isError) {
    const text = (result.content || []).filter((b) => b.type === "text").map((b) => b.text).join(" ");
    throw new Error(text || `${name} failed`);
  }
  return result.structuredContent || {};
}

function applyContext(context) {
  if (context.theme === "light" || context.theme === "dark") document.documentElement.dataset.theme = context.theme;
}

// -- what to show -----------------------------------------------------------------------------

function fromInput(args) {
  if (view.target) return;
  view.target = { kernel: args.kernel || undefined, execution: args.execution || undefined };
}

// The result names the execution (kernel and number); the view reads it.
function fromResult(result) {
  const named = (result._meta || {})["loomgate/execution"];
  const data = result.structuredContent || {};
  const target = { ...(named || { kernel: data.kernel, execution: data.execution }) };
  if (target.execution === undefined && view.target) target.execution = view.target.execution;
  if (target.kernel === undefined && view.target) target.kernel = view.target.kernel;
  view.target = target;
  refresh();
}

function args(extra = {}) {
  const out = { ...extra };
  if (view.target.kernel) out.kernel = view.target.kernel;
  return out;
}

async function refresh() {
  clearTimeout(view.timer);
  view.timer = null;
  if (view.reading) { view.again = true; return; }
  view.reading = true;
  try {
    const wanted = view.shown ? view.shown.number : view.target.execution;
    const data = await callTool("view_execution", args({ execution: wanted, head: HEAD, tail: TAIL }));
    show(data.execution);
    problem(null);
  } catch (error) {
    problem(error.message);
  } finally {
    view.reading = false;
  }
  if (view.again) { view.again = false; refresh(); return; }
  follow();
}

// Reads the execution again in a while, as long as it has not ended.
function follow() {
  clearTimeout(view.timer);
  view.timer = null;
  if (view.shown && !FINAL.has(view.shown.state)) view.timer = setTimeout(refresh, FOLLOW_MS);
}

function stopFollowing() {
  clearTimeout(view.timer);
  view.timer = null;
}

const SOURCE = {
  rich: async (number, index) => {
    const key = `${number}/${index}`;
    if (!view.rich.has(key)) view.rich.set(key, callTool("view_rich", args({ execution: number, index })));
    return view.rich.get(key);
  },
  traceback: async (number) => {
    if (!view.tracebacks.has(number)) view.tracebacks.set(number, callTool("view_traceback", args({ execution: number })));
    return view.tracebacks.get(number);
  },
  openPager: (number, first = 1) => openPager(first),
};

function show(x) {
  const before = view.shown;
  view.shown = x;
  if (!view.target.kernel) view.target.kernel = x.kernel_id;
  const card = renderExecution(x, SOURCE);
  const old = $("card").firstChild;
  const box = old && old.querySelector(".output");
  const following = !box || box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  $("card").replaceChildren(card);
  const output = card.querySelector(".output");
  if (following) output.scrollTop = output.scrollHeight;
  setStatus(FINAL.has(x.state) ? `ended ${x.state.replace("_", " ")}` : "following live");
  const live = x.state === "running" || x.state === "awaiting_input";
  $("controls").hidden = false;
  $("interrupt").hidden = !live;
  const asking = x.state === "awaiting_input" && x.input;
  const form = $("answer");
  if (asking && (form.hidden || !before || !before.input || before.input.prompt !== x.input.prompt)) {
    $("answer-prompt").textContent = x.input.prompt || "input:";
    $("answer-value").type = x.input.password ? "password" : "text";
    $("answer-value").value = "";
  }
  form.hidden = !asking;
  if (view.pager && FINAL.has(x.state) && (!before || !FINAL.has(before.state))) showPage(view.pager.first);
}

function setStatus(text) {
  $("status").textContent = text;
}

function problem(text) {
  $("problem").hidden = !text;
  $("problem").textContent = text || "";
}

// -- the person's controls --------------------------------------------------------------------

$("interrupt").addEventListener("click", async () => {
  if (!view.shown) return;
  $("interrupt").disabled = true;
  try {
    const data = await callTool("view_interrupt", args({ execution: view.shown.number }));
    show(data.execution);
    problem(null);
  } catch (error) {
    problem(error.message);
  } finally {
    $("interrupt").disabled = false;
    refresh();
  }
});

$("answer").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!view.shown) return;
  const field = $("answer-value");
  const value = field.value;
  field.value = "";
  $("answer").hidden = true;
  try {
    await callTool("view_send_input", args({ execution: view.shown.number, value }));
    problem(null);
  } catch (error) {
    problem(error.message);
  }
  refresh();
});

$("show-all").addEventListener("click", () => openPager(1));
$("pager-close").addEventListener("click", () => { view.pager = null; $("pager").hidden = true; });

async function openPager(first) {
  if (!view.shown) return;
  view.pager = { first, total: 0 };
  $("pager-title").textContent = `In [${view.shown.number}]`;
  $("pager").hidden = false;
  await showPage(first);
}

async function showPage(first) {
  const p = view.pager;
  try {
    const read = await callTool("view_output", args({ execution: view.shown.number, lines: `${first}:${first + PAGER_LINES - 1}` }));
    p.first = read.first || first;
    p.total = read.total;
    $("pager-range").textContent = read.lines.length
      ? `lines ${read.first}–${read.last} of ${read.total}` : `no lines (of ${read.total})`;
    renderPage($("pager-lines"), read.lines);
    $("pager-lines").scrollTop = 0;
  } catch (error) {
    problem(error.message);
  }
}

for (const button of document.querySelectorAll("[data-page]")) {
  button.addEventListener("click", () => {
    const p = view.pager;
    if (!p) return;
    const last = Math.max(1, p.total - PAGER_LINES + 1);
    const to = { first: 1, prev: Math.max(1, p.first - PAGER_LINES), next: Math.min(last, p.first + PAGER_LINES), last }[button.dataset.page];
    showPage(to);
  });
}

// -- start ------------------------------------------------------------------------------------

new ResizeObserver(() => {
  const root = document.documentElement;
  notify("ui/notifications/size-changed", { width: root.scrollWidth, height: root.scrollHeight });
}).observe(document.body);

(async () => {
  if (window.parent === window) { setStatus("open this view inside an MCP Apps host"); return; }
  try {
    const answer = await request("ui/initialize", {
      appInfo: { name: "loomgate-execution", version: "1" },
      appCapabilities: {},
      protocolVersion: PROTOCOL,
    });
    applyContext((answer && answer.hostContext) || {});
    notify("ui/notifications/initialized", {});
  } catch (error) {
    problem(error.message);
  }
})();
