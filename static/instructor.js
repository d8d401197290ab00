// Instructor console of the tool-call outcomes lab.
//
// One WebSocket (/instructor/ws, authenticated by the login cookie) brings
// the class overview (whole tables, at most a few per second) and, for the
// session being watched, its state frames (exactly the student's) and its
// timeline. Injections go through the JSON API (POST /api/inject), the same
// one scripts use. Rendering is keyed: table rows keep their elements, and a
// burst of frames is drawn once per animation frame. All server text goes
// through textContent, never HTML. The helpers both pages use are in dom.js.
//
// The table's order holds still while the teacher works in it (pointer or
// focus inside): rows are re-sorted only when they leave it, or when they
// click a heading. The default order is by name, which activity never changes.
//
// When the login has ended (a 401), the console stops for good: it closes its
// socket, cancels its timers and sends nothing more, then goes to the login
// form.

import {
  APIError,
  ConnectionIndicator,
  KeyedList,
  LiveSocket,
  api,
  byId,
  classPath,
  classScope,
  list,
  localTime,
  loggedOut,
  num,
  setData,
  setText,
  str,
  syncList,
  whenLoggedOut,
} from "./dom.js";
import { initProgress, renderProgress, stopProgress } from "./progress.js";
import { DiagramView } from "./diagram.js";
import { codeWatched, initCodeCases } from "./codeboard.js";
import { casesOverview, casesWatched, initCasesBoard } from "./casesboard.js";

// MAX_TIMELINE is how many timeline entries the console keeps: as many as the
// server keeps per session (maxTimeline in server/instructor.go), so a long
// watch shows what a fresh watch would, and the table does not grow forever.
const MAX_TIMELINE = 2000;

// scope is the class of a class console (/instructor/classes/{id}), "" for
// the open lab (/instructor): the table, "all" and deletions mean it
// (docs/classes.md).
const scope = classScope();

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
  injectionHelp: byId("injection-help"),
  table: byId("overview"),
  watchedExport: byId("watched-export"),
  watchedShiviz: byId("watched-shiviz"),
  watchedDebrief: byId("watched-debrief"),
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
  confirm: byId("inject-confirm"),
  confirmText: byId("inject-confirm-text"),
  confirmYes: byId("inject-confirm-yes"),
  confirmNo: byId("inject-confirm-no"),
  watchedOption: document.querySelector('#target option[value="watched"]'),
};

// The watched session's diagram (diagram.js), fetched again as its states
// arrive.
const diagram = new DiagramView(byId("w-diagram"), { status: (t) => setText(byId("w-diagram-status"), t) });

const state = {
  rows: new Map(), // id -> row of the last overview
  selected: new Set(),
  sort: { key: "name", dir: 1 },
  // The teacher is working in the table (pointer over it or focus in it):
  // existing rows keep their order.
  pointerIn: false,
  focusIn: false,
  resort: false, // the next draw sorts even while working (a heading click)
  watching: "",
  lastTimelineSeq: -1,
  drawFrame: 0, // the pending requestAnimationFrame, 0 if none
  stopped: false, // the login ended: no more requests, timers or sockets
};

// The overview table, keyed by session id; each row is
// { el, check, watch, cells, seq, tabs, name }; order is the ids as last
// drawn.
let drawnOrder = [];
const overviewRows = new KeyedList(ui.body, { make: makeRow, update: updateRow });

const shortId = (id) => id.slice(0, 8);
const label = (row) => row.name || shortId(row.id);

// ---- connection -----------------------------------------------------------

const indicator = new ConnectionIndicator(ui.connection);

// The socket (dom.js LiveSocket): an attempt that never opened counts as a
// failure for the backoff; after every close it asks the API whether the
// login has ended before trying again.
const live = new LiveSocket(scope ? `/instructor/ws?class=${encodeURIComponent(scope)}` : "/instructor/ws", {
  status: (s) => {
    if (s === "connecting") indicator.show("connecting", "Connecting…");
    else if (s === "connected") indicator.show("connected", "Connected");
    else indicator.show("waiting", "Reconnecting…");
  },
  opened: () => {
    if (state.watching) send({ type: "watch", session: state.watching });
  },
  frame: receive,
  login: { probe: scope ? classPath(scope) : "/api/sessions", ended: loggedOut },
});

// After a 401 the console stops for good (dom.js loggedOut, which then goes
// to the login form): no socket, timer or request outlives it.
whenLoggedOut(() => {
  state.stopped = true;
  live.stop(1000, "logged out");
  cancelAnimationFrame(state.drawFrame);
  state.drawFrame = 0;
  stopProgress();
  indicator.show("waiting", "Logged out");
});

function send(frame) {
  if (!state.stopped) live.send(JSON.stringify(frame));
}

function receive(frame) {
  switch (frame?.type) {
    case "overview":
      state.rows = new Map(list(frame.sessions).map((r) => [str(r.id), r]));
      scheduleDraw();
      renderProgress(frame);
      casesOverview(frame);
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
  if (state.drawFrame || state.stopped) return;
  state.drawFrame = requestAnimationFrame(() => {
    state.drawFrame = 0;
    drawOverview();
  });
}

function matches(row, needle) {
  if (!needle) return true;
  return [row.name, row.id, row.runId, row.status].some((v) => str(v).toLowerCase().includes(needle));
}

// runNumber is N of a run id "run-N", so run-10 sorts after run-9; 0 for an
// id of another shape.
function runNumber(runId) {
  const m = /run-(\d+)/.exec(str(runId));
  return m ? Number(m[1]) : 0;
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
    x = runNumber(x);
    y = runNumber(y);
  }
  if (x < y) return -dir;
  if (x > y) return dir;
  return a.id < b.id ? -1 : 1;
}

// working says the teacher is in the table, where rows must not move.
const working = () => state.pointerIn || state.focusIn;

function drawOverview() {
  const needle = ui.filter.value.trim().toLowerCase();
  let shown = [...state.rows.values()].filter((r) => matches(r, needle)).sort(compare);
  if (working() && !state.resort) {
    // Rows already shown keep their places; new ones join at the end.
    const place = new Map(drawnOrder.map((id, i) => [id, i]));
    const known = shown.filter((r) => place.has(r.id)).sort((a, b) => place.get(a.id) - place.get(b.id));
    shown = [...known, ...shown.filter((r) => !place.has(r.id))];
  }
  state.resort = false;
  drawnOrder = shown.map((r) => r.id);
  for (const id of state.selected) if (!state.rows.has(id)) state.selected.delete(id);
  overviewRows.render(shown, (row) => row.id);
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
  for (const key of ["tabs", "runId", "status", "waiting", "receipts", "lastActivity"]) {
    cells[key] = document.createElement("td");
    cells[key].className = key;
    tr.append(cells[key]);
  }
  return { el: tr, check, watch, cells, seq: -1, tabs: -1 };
}

function updateRow(dom, row) {
  dom.check.checked = state.selected.has(row.id);
  dom.check.setAttribute("aria-label", `Select ${label(row)}`);
  dom.el.classList.toggle("watched", row.id === state.watching);
  if (dom.seq === row.seq && dom.tabs === row.tabs && dom.name === row.name) return;
  dom.seq = row.seq;
  dom.tabs = row.tabs;
  dom.name = row.name;
  setText(dom.watch, label(row));
  dom.watch.title = row.id;
  setText(dom.cells.tabs, String(num(row.tabs)));
  setText(dom.cells.runId, str(row.runId));
  setText(dom.cells.status, str(row.status));
  setData(dom.cells.status, "status", str(row.status));
  setText(dom.cells.waiting, String(num(row.waiting)));
  dom.cells.waiting.title = `${num(row.waiting)} never delivered, of ${num(row.held)} held`;
  setText(dom.cells.receipts, String(num(row.receipts)));
  setText(dom.cells.lastActivity, localTime(row.lastActivity));
}

ui.filter.addEventListener("input", () => {
  scheduleDraw();
  saveView();
});

// The watched session, filter and sort live in the page's address, so a
// reload, or a reload after a server restart, shows the same view.
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
  const button = key ? document.querySelector(`th button[data-sort="${CSS.escape(key)}"]`) : null;
  if (button) {
    state.sort = { key, dir: dir === "asc" ? 1 : -1 };
    showSort(button);
  }
  const id = q.get("watch");
  if (id) watch(id);
}

// showSort marks the sorted column on its header cell (aria-sort belongs to
// the columnheader, not to the button in it).
function showSort(button) {
  for (const b of document.querySelectorAll("th button[data-sort]")) {
    const th = b.closest("th");
    if (b === button) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
}

document.querySelector("#overview thead").addEventListener("click", (e) => {
  const button = e.target.closest("button[data-sort]");
  if (!button) return;
  const key = button.dataset.sort;
  state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
  showSort(button);
  state.resort = true;
  scheduleDraw();
  saveView();
});

ui.table.addEventListener("pointerenter", () => {
  state.pointerIn = true;
});
ui.table.addEventListener("pointerleave", () => {
  state.pointerIn = false;
  scheduleDraw();
});
ui.table.addEventListener("focusin", () => {
  state.focusIn = true;
});
ui.table.addEventListener("focusout", (e) => {
  if (ui.table.contains(e.relatedTarget)) return;
  state.focusIn = false;
  scheduleDraw();
});

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
  if (!button) return;
  watch(button.dataset.session);
  // Picking a student to watch makes them the target, unless the teacher
  // has selected sessions: Inject then means the one being watched.
  if (ui.target.value === "selected" && state.selected.size === 0) ui.target.value = "watched";
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
  // The student's page in another tab, read only (?observe): it follows the
  // session through this login and never acts as the student.
  ui.watchedLink.href = `/lab/${encodeURIComponent(id)}?observe`;
  ui.watchedExport.href = `/api/sessions/${encodeURIComponent(id)}/export`;
  ui.watchedShiviz.href = `/api/sessions/${encodeURIComponent(id)}/shiviz.log`;
  if (scope) {
    ui.watchedDebrief.href = `/instructor/classes/${encodeURIComponent(scope)}/projector?session=${encodeURIComponent(id)}`;
    ui.watchedDebrief.hidden = false;
  }
  diagram.show(`/api/sessions/${encodeURIComponent(id)}/diagram.svg`);
  send({ type: "watch", session: id });
  scheduleDraw();
  saveView();
}

function renderWatched(s) {
  const call = s.call ?? {};
  setText(ui.watchedName, str(s.name) || shortId(str(s.session)));
  setText(ui.watchedOption, `The session shown below (${str(s.name) || shortId(str(s.session))})`);
  diagram.changed(num(s.seq));
  codeWatched(s);
  casesWatched(s);
  setText(ui.run, str(call.runId));
  setText(ui.call, str(call.callId));
  setText(ui.status, str(call.status));
  setData(ui.status, "status", str(call.status));
  setText(ui.detail, str(call.detail));
  setText(ui.notice, str(s.notice));
  syncList(ui.queue, list(s.queue), (li, m) => {
    setText(li, `Message ${str(m.number) || num(m.id)}: ${str(m.label)}${m.from === "instructor" ? " (from instructor)" : ""}`);
    li.classList.toggle("from-instructor", m.from === "instructor");
  });
  syncList(ui.receipts, list(s.receipts), (li, r) => {
    const predicted = r.predicted ? ` (predicted ${str(r.predicted)}: ${r.right ? "right" : "wrong"})` : "";
    setText(li, `Delivered message ${str(r.number) || num(r.message)}: ${str(r.notice)}${r.by === "instructor" ? " (by instructor)" : ""}${predicted}`);
    li.classList.toggle("by-instructor", r.by === "instructor");
  });
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
    const message = num(e.message) > 0 ? `${str(e.number) || num(e.message)}: ${str(e.label)}` : str(e.label);
    const predicted = e.predicted ? ` (predicted ${str(e.predicted)}: ${e.right ? "right" : "wrong"})` : "";
    for (const [text, cls] of [
      [String(num(e.seq)), ""],
      [localTime(e.time), ""],
      [str(e.actor), e.actor === "instructor" ? "by-instructor" : ""],
      [str(e.kind), ""],
      [message, "wrap"],
      [str(e.notice) + predicted, "wrap"],
    ]) {
      const td = document.createElement("td");
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    state.lastTimelineSeq = num(e.seq);
    return tr;
  });
  // Newest first, so a live change shows at the top; the oldest go past
  // MAX_TIMELINE, as they do on the server.
  ui.timeline.prepend(...rows.reverse());
  while (ui.timeline.children.length > MAX_TIMELINE) ui.timeline.lastElementChild.remove();
}

// ---- injection ------------------------------------------------------------

// What each preset injects, built from each session's own history (the
// table in docs/instructor.md); run-n is the session's current run.
const PRESET_HELP = {
  staleReply:
    "A completion for an older run: the student's own held one if there is one, else one for run-(n-1). Not applied to a session still at run-1: it has no older run.",
  duplicateFinal: "The exact reply that recorded the current run's final outcome. Not applied before one.",
  contradictoryFinal: "The opposite final reply for the current run. Not applied before a final outcome.",
  wrongCallId: "A completion for the current run with callId “search”.",
  malformedJson: "The current default reply with its closing brace cut off: not JSON.",
  wrongShape: "A completion for the current run whose output is a number.",
  markupOutput: "A completion for the current run whose output is HTML markup (shown as text).",
  emptyOutput: "A completion for the current run with an empty output.",
  deadline: "A deadline for the current run.",
  staleDeadline: "A deadline for run-(n-1). Not applied to a session still at run-1.",
  practice:
    "Each session gets its own next kind to practise (what its student last got wrong, or has not met yet), with the call set up for it, as if the student had pressed Practise. Always held: the student predicts a practice before delivering it. Not applied while one is held, or once all ten kinds are mastered.",
  raw: "Your text, sent as is.",
  customDeadline: "A deadline for the runId and callId you give.",
};

function showInjectionFields() {
  ui.rawBox.hidden = ui.injection.value !== "raw";
  ui.deadlineBox.hidden = ui.injection.value !== "customDeadline";
  setText(ui.injectionHelp, PRESET_HELP[ui.injection.value] ?? "");
}
ui.injection.addEventListener("change", showInjectionFields);

// targetBody is the request's targets for an "Into" choice (the inject
// form's and the code case form's): {body} or {error}.
function targetBody(target) {
  const body = {};
  if (target === "all" && scope) body.class = scope;
  else if (target === "all") body.sessions = [...state.rows.keys()];
  else if (target === "watched") body.sessions = state.watching ? [state.watching] : [];
  else body.sessions = [...state.selected];
  if ((body.sessions ?? [1]).length === 0) {
    return { error: target === "watched" ? "Choose a session in the table first." : "Select at least one session." };
  }
  return { body };
}

function injectionBody() {
  const { body, error } = targetBody(ui.target.value);
  if (error) return { error };
  body.mode = document.querySelector('input[name="mode"]:checked')?.value ?? "hold";
  const what = ui.injection.value;
  if (what === "practice") body.mode = "hold"; // a practice is predicted first
  if (what === "raw") body.raw = ui.raw.value;
  else if (what === "customDeadline") body.deadline = { runId: ui.deadlineRun.value, callId: ui.deadlineCall.value };
  else body.preset = what;
  return { body };
}

// injectionName is the chosen message in words, as the menu says it.
const injectionName = () => ui.injection.selectedOptions[0]?.textContent.replace(/…$/, "") ?? ui.injection.value;

ui.inject.addEventListener("click", () => {
  if (state.stopped) return;
  const { body, error } = injectionBody();
  ui.results.replaceChildren();
  if (error) {
    setText(ui.summary, error);
    return;
  }
  if (ui.target.value !== "all") {
    sendInjection(body);
    return;
  }
  // A class-wide injection reaches every student at once: asked first, with
  // how many sessions it reaches.
  const n = state.rows.size;
  const mode = body.mode === "deliver" ? "deliver it now" : "hold it in their queues";
  setText(
    ui.confirmText,
    `“${injectionName()}” goes to all ${n} session${n === 1 ? "" : "s"} ${scope ? "of this class" : "of the open lab"}; the lab will ${mode}.`,
  );
  setText(ui.confirmYes, `Inject into ${n} session${n === 1 ? "" : "s"}`);
  ui.confirm.showModal();
  ui.confirmYes.onclick = () => {
    ui.confirm.close();
    sendInjection(body);
  };
});
ui.confirmNo.addEventListener("click", () => {
  ui.confirm.close();
  setText(ui.summary, "Not injected.");
});

async function sendInjection(body) {
  if (state.stopped) return;
  setText(ui.summary, "Injecting…");
  let out;
  try {
    out = await api("POST", "/api/inject", body);
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    // A refusal that still says what it did in each session is shown as an
    // answer.
    out = e.body;
    if (e.status === 401) return; // the console has stopped (loggedOut)
    if (e.status === 0) {
      setText(ui.summary, "The injection did not reach the server.");
      return;
    }
    if (e.unreadable) {
      setText(ui.summary, `The server's answer could not be read (${e.status}).`);
      return;
    }
    if (list(out?.results).length === 0) {
      setText(ui.summary, e.error || `The server refused the injection (${e.status}).`);
      return;
    }
  }
  const results = list(out?.results);
  // A message delivered at once says what it did in each session; the
  // summary adds the class distribution ("2 unresolved, 1 ignored").
  const outcomes = Object.entries(out?.outcomes ?? {})
    .filter(([, n]) => num(n) > 0)
    .sort((a, b) => num(b[1]) - num(a[1]))
    .map(([word, n]) => `${num(n)} ${word}`);
  const distribution = outcomes.length > 0 ? ` Outcomes: ${outcomes.join(", ")}.` : "";
  setText(ui.summary, `Applied in ${num(out.applied)} of ${results.length} sessions.${distribution}`);
  for (const r of results) {
    const li = document.createElement("li");
    const row = state.rows.get(str(r.session));
    const who = row ? label(row) : shortId(str(r.session));
    // A delivery now says what was delivered ("a duplicate …"), not only
    // the notice, which is the same for a duplicate and a contradiction.
    const did = str(r.notice) ? `: delivered ${injectionLabel(body)}: ${str(r.notice)}` : "";
    li.textContent = r.applied ? `${who}: applied${did}` : `${who}: not applied: ${str(r.error)}`;
    if (!r.applied) li.className = "refused";
    ui.results.append(li);
  }
}

// injectionLabel names what body injects, in a result line.
function injectionLabel(body) {
  if (body.preset === "duplicateFinal") return "a duplicate of the accepted final reply";
  if (body.preset) return `“${PRESET_NAMES[body.preset] ?? body.preset}”`;
  return body.raw !== undefined ? "your free-form reply" : "your deadline";
}

const PRESET_NAMES = Object.fromEntries([...ui.injection.options].map((o) => [o.value, o.textContent]));

// ---- deleting sessions ------------------------------------------------------

async function deleteSessions(body, what) {
  if (state.stopped || !confirm(`Delete ${what}? Their students' work is gone for good.`)) return;
  let out;
  try {
    out = await api("POST", "/api/sessions/delete", body);
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    if (e.status === 401) return; // the console has stopped (loggedOut)
    if (e.status === 0 || e.unreadable) setText(ui.deleteMessage, "The deletion did not reach the server.");
    else setText(ui.deleteMessage, e.error || `The server refused the deletion (${e.status}).`);
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
initProgress();
initCodeCases({
  targets: targetBody,
  label: (id) => {
    const row = state.rows.get(id);
    return row ? label(row) : shortId(id);
  },
});
initCasesBoard({ targets: targetBody, scope });
live.connect();
