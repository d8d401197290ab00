// Instructor console of the tool-call outcomes lab.
//
// One WebSocket (/instructor/ws, authenticated by the login cookie) brings
// the class overview (whole tables, at most a few per second) and, for the
// session being watched, its state frames (exactly the student's) and its
// timeline. Injections go through the JSON API (POST /api/inject), the same
// one scripts use. Rendering is keyed: table rows keep their elements, and a
// burst of frames is drawn once per animation frame. All server text goes
// through textContent, never HTML.

const RECONNECT_BASE_MS = 250;
const RECONNECT_CAP_MS = 10_000;

const byId = (id) => document.getElementById(id);
// scope is the class of a class console (/instructor/classes/{id}), "" for
// the open lab (/instructor): the table, "all" and deletions mean it.
const scope = (location.pathname.match(/^\/instructor\/classes\/([^/]+)\/?$/) || [])[1] || "";
const str = (v) => (typeof v === "string" ? v : "");
const num = (v) => (typeof v === "number" ? v : 0);
const list = (v) => (Array.isArray(v) ? v : []);

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

const ui = {
  connection: byId("connection"),
  filter: byId("filter"),
  count: byId("count"),
  selectAll: byId("select-all"),
  body: byId("overview-body"),
  empty: byId("overview-empty"),
  target: byId("target"),
  injection: byId("injection"),
  rawBox: byId("raw-box"),
  raw: byId("raw"),
  deadlineBox: byId("deadline-box"),
  deadlineRun: byId("deadline-run"),
  deadlineCall: byId("deadline-call"),
  inject: byId("inject"),
  summary: byId("inject-summary"),
  results: byId("inject-results"),
  watchedName: byId("watched-name"),
  watchedNone: byId("watched-none"),
  watched: byId("watched"),
  watchedId: byId("watched-id"),
  watchedLink: byId("watched-link"),
  run: byId("w-run"),
  call: byId("w-call"),
  status: byId("w-status"),
  detail: byId("w-detail"),
  notice: byId("w-notice"),
  queue: byId("w-queue"),
  receipts: byId("w-receipts"),
  timeline: byId("timeline-body"),
  deleteSelected: byId("delete-selected"),
  deleteIdle: byId("delete-idle"),
  deleteMessage: byId("delete-message"),
};

const state = {
  socket: null,
  failures: 0,
  rows: new Map(), // id -> row of the last overview
  dom: new Map(), // id -> { tr, cells, check }
  selected: new Set(),
  sort: { key: "lastActivity", dir: -1 },
  watching: "",
  lastTimelineSeq: -1,
  drawPending: false,
};

const shortId = (id) => id.slice(0, 8);
const label = (row) => row.name || shortId(row.id);

// ---- connection -----------------------------------------------------------

function showConnection(s, text) {
  if (ui.connection.dataset.state !== s) ui.connection.dataset.state = s;
  setText(ui.connection, text);
}

function connect() {
  showConnection("connecting", "Connecting…");
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = scope ? `?class=${scope}` : "";
  const ws = new WebSocket(`${scheme}//${location.host}/instructor/ws${query}`);
  state.socket = ws;
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
    state.failures = 0;
    showConnection("connected", "Connected");
    if (state.watching) send({ type: "watch", session: state.watching });
  });
  ws.addEventListener("message", (e) => {
    if (state.socket === ws) receive(e.data);
  });
  ws.addEventListener("close", () => {
    if (state.socket !== ws) return;
    state.socket = null;
    if (!opened) state.failures += 1;
    checkLogin().then(() => {
      const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(state.failures, 16));
      showConnection("waiting", "Reconnecting…");
      setTimeout(connect, Math.random() * ceiling);
    });
  });
}

// checkLogin sends the page back to the login form when the login has ended
// (the WebSocket cannot say why it was refused).
async function checkLogin() {
  try {
    const resp = await fetch(scope ? `/api/classes/${scope}` : "/api/sessions", { credentials: "same-origin" });
    if (resp.status === 401) location.assign("/instructor/login");
  } catch {
    // The server is away; the reconnect loop goes on.
  }
}

function send(frame) {
  const ws = state.socket;
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

function receive(data) {
  let frame;
  try {
    frame = JSON.parse(data);
  } catch {
    return;
  }
  switch (frame?.type) {
    case "overview":
      state.rows = new Map(list(frame.sessions).map((r) => [str(r.id), r]));
      scheduleDraw();
      break;
    case "state":
      if (frame.session === state.watching) renderWatched(frame);
      break;
    case "timeline":
      if (frame.session === state.watching) renderTimeline(frame);
      break;
    case "error":
      setText(ui.summary, str(frame.error));
      break;
  }
}

// ---- overview -------------------------------------------------------------

function scheduleDraw() {
  if (state.drawPending) return;
  state.drawPending = true;
  requestAnimationFrame(() => {
    state.drawPending = false;
    drawOverview();
  });
}

function matches(row, needle) {
  if (!needle) return true;
  return [row.name, row.id, row.runId, row.status].some((v) => str(v).toLowerCase().includes(needle));
}

function compare(a, b) {
  const { key, dir } = state.sort;
  let x = a[key];
  let y = b[key];
  if (key === "lastActivity") {
    x = Date.parse(x) || 0;
    y = Date.parse(y) || 0;
  } else if (key === "name") {
    x = label(a).toLowerCase();
    y = label(b).toLowerCase();
  } else if (key === "runId") {
    x = Number(str(x).slice(4)) || 0;
    y = Number(str(y).slice(4)) || 0;
  }
  if (x < y) return -dir;
  if (x > y) return dir;
  return a.id < b.id ? -1 : 1;
}

function drawOverview() {
  const needle = ui.filter.value.trim().toLowerCase();
  const shown = [...state.rows.values()].filter((r) => matches(r, needle)).sort(compare);
  for (const [id, dom] of state.dom) {
    if (!state.rows.has(id)) {
      dom.tr.remove();
      state.dom.delete(id);
    }
  }
  for (const id of state.selected) if (!state.rows.has(id)) state.selected.delete(id);
  const wanted = shown.map((row) => {
    let dom = state.dom.get(row.id);
    if (!dom) {
      dom = makeRow(row.id);
      state.dom.set(row.id, dom);
    }
    updateRow(dom, row);
    return dom.tr;
  });
  const keep = new Set(wanted);
  for (const tr of [...ui.body.children]) if (!keep.has(tr)) tr.remove();
  placeInOrder(ui.body, wanted);
  ui.empty.hidden = state.rows.size > 0;
  setText(ui.count, `${shown.length} of ${state.rows.size} sessions shown, ${state.selected.size} selected`);
  ui.selectAll.checked = shown.length > 0 && shown.every((r) => state.selected.has(r.id));
}

function makeRow(id) {
  const tr = document.createElement("tr");
  tr.dataset.session = id;
  const check = document.createElement("input");
  check.type = "checkbox";
  check.className = "select";
  check.dataset.session = id;
  const first = document.createElement("td");
  first.append(check);
  const watch = document.createElement("button");
  watch.type = "button";
  watch.className = "watch";
  watch.dataset.session = id;
  const nameCell = document.createElement("td");
  nameCell.append(watch);
  const cells = {};
  tr.append(first, nameCell);
  for (const key of ["tabs", "runId", "status", "held", "receipts", "lastActivity"]) {
    cells[key] = document.createElement("td");
    cells[key].className = key;
    tr.append(cells[key]);
  }
  return { tr, check, watch, cells, seq: -1, tabs: -1 };
}

function updateRow(dom, row) {
  dom.check.checked = state.selected.has(row.id);
  dom.check.setAttribute("aria-label", `Select ${label(row)}`);
  dom.tr.classList.toggle("watched", row.id === state.watching);
  if (dom.seq === row.seq && dom.tabs === row.tabs && dom.name === row.name) return;
  dom.seq = row.seq;
  dom.tabs = row.tabs;
  dom.name = row.name;
  setText(dom.watch, label(row));
  dom.watch.title = row.id;
  setText(dom.cells.tabs, String(num(row.tabs)));
  setText(dom.cells.runId, str(row.runId));
  setText(dom.cells.status, str(row.status));
  dom.cells.status.dataset.status = str(row.status);
  setText(dom.cells.held, String(num(row.held)));
  setText(dom.cells.receipts, String(num(row.receipts)));
  const when = new Date(str(row.lastActivity));
  setText(dom.cells.lastActivity, Number.isNaN(when.getTime()) ? "" : when.toLocaleTimeString());
}

// placeInOrder puts wanted at the start of parent moving as few nodes as it can.
function placeInOrder(parent, wanted) {
  let cursor = parent.firstElementChild;
  for (const node of wanted) {
    if (node === cursor) cursor = cursor.nextElementSibling;
    else parent.insertBefore(node, cursor);
  }
}

ui.filter.addEventListener("input", () => {
  scheduleDraw();
  saveView();
});

// The watched session, filter and sort live in the page's URL, so a reload
// or a server restart shows the same view.
function saveView() {
  const q = new URLSearchParams();
  if (state.watching) q.set("watch", state.watching);
  if (ui.filter.value) q.set("filter", ui.filter.value);
  q.set("sort", `${state.sort.key}.${state.sort.dir > 0 ? "asc" : "desc"}`);
  history.replaceState(null, "", `${location.pathname}?${q}`);
}

function restoreView() {
  const q = new URLSearchParams(location.search);
  ui.filter.value = q.get("filter") ?? "";
  const [key, dir] = (q.get("sort") ?? "").split(".");
  const button = document.querySelector(`th button[data-sort="${CSS.escape(key)}"]`);
  if (button) {
    state.sort = { key, dir: dir === "asc" ? 1 : -1 };
    showSort(button);
  }
  const id = q.get("watch");
  if (id) watch(id);
}

document.querySelector("#overview thead").addEventListener("click", (e) => {
  const button = e.target.closest("button[data-sort]");
  if (!button) return;
  const key = button.dataset.sort;
  state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
  showSort(button);
  scheduleDraw();
  saveView();
});

function showSort(button) {
  for (const b of document.querySelectorAll("th button[data-sort]")) {
    if (b === button) b.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
    else b.removeAttribute("aria-sort");
  }
}

ui.body.addEventListener("change", (e) => {
  const check = e.target.closest("input.select");
  if (!check) return;
  if (check.checked) state.selected.add(check.dataset.session);
  else state.selected.delete(check.dataset.session);
  scheduleDraw();
});

ui.selectAll.addEventListener("change", () => {
  const needle = ui.filter.value.trim().toLowerCase();
  for (const row of state.rows.values()) {
    if (!matches(row, needle)) continue;
    if (ui.selectAll.checked) state.selected.add(row.id);
    else state.selected.delete(row.id);
  }
  scheduleDraw();
});

ui.body.addEventListener("click", (e) => {
  const button = e.target.closest("button.watch");
  if (button) watch(button.dataset.session);
});

// ---- one session ----------------------------------------------------------

function watch(id) {
  state.watching = id;
  state.lastTimelineSeq = -1;
  ui.timeline.replaceChildren();
  ui.queue.replaceChildren();
  ui.receipts.replaceChildren();
  ui.watchedNone.hidden = true;
  ui.watched.hidden = false;
  setText(ui.watchedId, id);
  ui.watchedLink.href = `/lab/${encodeURIComponent(id)}`;
  send({ type: "watch", session: id });
  scheduleDraw();
  saveView();
}

function renderWatched(s) {
  const call = s.call ?? {};
  setText(ui.watchedName, str(s.name) || shortId(str(s.session)));
  setText(ui.run, str(call.runId));
  setText(ui.call, str(call.callId));
  setText(ui.status, str(call.status));
  ui.status.dataset.status = str(call.status);
  setText(ui.detail, str(call.detail));
  setText(ui.notice, str(s.notice));
  syncList(ui.queue, list(s.queue), (li, m) => {
    setText(li, `Message ${num(m.id)}: ${str(m.label)}${m.from === "instructor" ? " (from instructor)" : ""}`);
    li.classList.toggle("from-instructor", m.from === "instructor");
  });
  syncList(ui.receipts, list(s.receipts), (li, r) => {
    setText(li, `Delivered message ${num(r.message)}: ${str(r.notice)}${r.by === "instructor" ? " (by instructor)" : ""}`);
    li.classList.toggle("by-instructor", r.by === "instructor");
  });
}

function syncList(parent, items, fill) {
  items.forEach((item, i) => {
    let li = parent.children[i];
    if (!li) {
      li = document.createElement("li");
      parent.append(li);
    }
    fill(li, item);
  });
  while (parent.children.length > items.length) parent.lastElementChild.remove();
}

function renderTimeline(frame) {
  const entries = list(frame.entries);
  if (frame.reset) {
    ui.timeline.replaceChildren();
    state.lastTimelineSeq = -1;
  } else if (entries.length > 0 && state.lastTimelineSeq >= 0 && num(entries[0].seq) !== state.lastTimelineSeq + 1) {
    // A frame was dropped on the way (a slow connection): ask again.
    send({ type: "watch", session: state.watching });
    return;
  }
  const rows = entries.map((e) => {
    const tr = document.createElement("tr");
    const when = new Date(str(e.time));
    const message = num(e.message) > 0 ? `${num(e.message)}: ${str(e.label)}` : str(e.label);
    for (const [text, cls] of [
      [String(num(e.seq)), ""],
      [Number.isNaN(when.getTime()) ? "" : when.toLocaleTimeString(), ""],
      [str(e.actor), e.actor === "instructor" ? "by-instructor" : ""],
      [str(e.kind), ""],
      [message, "wrap"],
      [str(e.notice), "wrap"],
    ]) {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    state.lastTimelineSeq = num(e.seq);
    return tr;
  });
  // Newest first, so a live change shows at the top.
  ui.timeline.prepend(...rows.reverse());
}

// ---- injection ------------------------------------------------------------

function showInjectionFields() {
  ui.rawBox.hidden = ui.injection.value !== "raw";
  ui.deadlineBox.hidden = ui.injection.value !== "customDeadline";
}
ui.injection.addEventListener("change", showInjectionFields);

function injectionBody() {
  const body = {};
  const target = ui.target.value;
  if (target === "all" && scope) body.class = scope;
  else if (target === "all") body.sessions = [...state.rows.keys()];
  else if (target === "watched") body.sessions = state.watching ? [state.watching] : [];
  else body.sessions = [...state.selected];
  if ((body.sessions ?? [1]).length === 0) {
    return { error: target === "watched" ? "Choose a session in the table first." : "Select at least one session." };
  }
  body.mode = document.querySelector('input[name="mode"]:checked')?.value ?? "hold";
  const what = ui.injection.value;
  if (what === "raw") body.raw = ui.raw.value;
  else if (what === "customDeadline") body.deadline = { runId: ui.deadlineRun.value, callId: ui.deadlineCall.value };
  else body.preset = what;
  return { body };
}

ui.inject.addEventListener("click", async () => {
  const { body, error } = injectionBody();
  ui.results.replaceChildren();
  if (error) {
    setText(ui.summary, error);
    return;
  }
  setText(ui.summary, "Injecting…");
  let resp;
  let out;
  try {
    resp = await fetch("/api/inject", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    out = await resp.json();
  } catch {
    setText(ui.summary, "The injection did not reach the server.");
    return;
  }
  if (resp.status === 401) location.assign("/instructor/login");
  const results = list(out?.results);
  if (!resp.ok && results.length === 0) {
    setText(ui.summary, str(out?.error) || `The server refused the injection (${resp.status}).`);
    return;
  }
  setText(ui.summary, `Applied in ${num(out.applied)} of ${results.length} sessions.`);
  for (const r of results) {
    const li = document.createElement("li");
    const row = state.rows.get(str(r.session));
    const who = row ? label(row) : shortId(str(r.session));
    li.textContent = r.applied ? `${who}: applied` : `${who}: not applied: ${str(r.error)}`;
    if (!r.applied) li.className = "refused";
    ui.results.append(li);
  }
});

// ---- deleting sessions ------------------------------------------------------

async function deleteSessions(body, what) {
  if (!confirm(`Delete ${what}? Their students' work is gone for good.`)) return;
  let out = {};
  try {
    const resp = await fetch("/api/sessions/delete", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (resp.status === 401) location.assign("/instructor/login");
    out = await resp.json();
    if (!resp.ok) throw new Error(str(out?.error) || `The server answered ${resp.status}.`);
  } catch (e) {
    setText(ui.deleteMessage, e.message);
    return;
  }
  const gone = list(out.deleted);
  for (const id of gone) state.selected.delete(id);
  setText(ui.deleteMessage, `Deleted ${gone.length} session${gone.length === 1 ? "" : "s"}.`);
}

ui.deleteSelected.addEventListener("click", () => {
  const ids = [...state.selected];
  if (ids.length === 0) {
    setText(ui.deleteMessage, "Select at least one session.");
    return;
  }
  deleteSessions({ sessions: ids }, `${ids.length} selected session${ids.length === 1 ? "" : "s"}`);
});
ui.deleteIdle.hidden = scope !== "";
ui.deleteIdle.addEventListener("click", () =>
  deleteSessions({ idleOpenLab: true }, "every open-lab session idle for over an hour"),
);

showInjectionFields();
restoreView();
connect();
