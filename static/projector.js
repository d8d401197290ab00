// Projector page of a class (/instructor/classes/{id}/projector): the join
// address, the code and its QR code in type readable from the back of a
// room, a live count of the students who joined and how many are on each
// step of the exercise ("Step 1: 3 · Step 2: 5 · all nine: 2"; counts
// only). Names are hidden by default (it is a shared screen); a toggle shows
// them. Both come from the class-scoped instructor WebSocket's overview
// frames (each row's "current" step, 0 once all nine are done). Text goes through
// textContent only (dom.js).

import { DiagramView } from "./diagram.js";
import { APIError, LiveSocket, api, byId, classPath, classScope, list, num, setText, str, whenLoggedOut } from "./dom.js";

const classId = classScope();
// ?session=<id>: the debrief view, one student's diagram at its large size
// instead of the join screen; the name only when the teacher shows it.
const debriefId = new URLSearchParams(location.search).get("session") ?? "";

const ui = {
  title: byId("title"),
  url: byId("join-url"),
  code: byId("code"),
  closed: byId("closed"),
  loopback: byId("loopback"),
  qr: byId("qr"),
  count: byId("count"),
  countWord: byId("count-word"),
  steps: byId("steps"),
  mastery: byId("mastery"),
  toggle: byId("toggle-names"),
  names: byId("names"),
  consoleLink: byId("console-link"),
  connection: byId("connection"),
};

let names = [];

// The socket brings the overview frames; before each reconnection the class
// is loaded again (its code may have changed). A 401 from the API sends the
// page to the login form (dom.js loggedOut).
const live = new LiveSocket(`/instructor/ws?class=${encodeURIComponent(classId)}`, {
  status: (state) => {
    if (state === "connected") setText(ui.connection, "");
    else if (state === "waiting") setText(ui.connection, "Reconnecting…");
  },
  frame: (frame) => {
    if (frame?.type === "overview") {
      showRows(list(frame.sessions));
      debriefRows(list(frame.sessions));
      setText(ui.mastery, masteryCounts(list(frame.exercise?.mastery)));
    }
  },
  beforeRetry: loadClass,
});
whenLoggedOut(() => live.stop());

// loadClass shows the class; it rejects when the request did not reach the
// server.
async function loadClass() {
  let body;
  try {
    body = await api("GET", classPath(classId));
  } catch (e) {
    if (!(e instanceof APIError) || e.status === 0) throw e;
    if (e.status !== 401) setText(ui.title, e.error || `The class could not be loaded (${e.status}).`);
    return;
  }
  const c = body.class || {};
  setText(ui.title, str(c.title));
  document.title = `Join ${str(c.title)} · Tool-call outcomes lab`;
  setText(ui.url, str(c.joinUrl).replace(/\/j\/\d+$/, "/join"));
  ui.loopback.hidden = !isLoopback(str(c.joinUrl));
  setText(ui.code, str(c.code));
  ui.closed.hidden = c.open !== false;
  // The code in the address makes a new code (after a reopen) a new image.
  ui.qr.src = `${classPath(classId)}/qr.png?code=${encodeURIComponent(str(c.code))}`;
  showRows(list(body.sessions));
  debriefRows(list(body.sessions));
}

// isLoopback says whether a join address names this computer only
// (127.0.0.0/8, localhost, ::1), which no phone in the room can open.
function isLoopback(url) {
  let host = "";
  try {
    host = new URL(url).hostname;
  } catch {
    return false;
  }
  return host === "localhost" || host.endsWith(".localhost") || /^127\./.test(host) || host === "[::1]";
}

function showRows(rows) {
  names = rows.map((r) => str(r.name)).sort((a, b) => a.localeCompare(b));
  setText(ui.count, String(names.length));
  setText(ui.countWord, names.length === 1 ? "student joined" : "students joined");
  setText(ui.steps, stepDistribution(rows));
  if (!ui.names.hidden) drawNames();
}

// masteryCounts is how many students have mastered each kind of message,
// without names: "Mastered: a matching reply 4 · a stale reply 2 · …";
// empty before anyone has mastered one.
function masteryCounts(kinds) {
  if (!kinds.some((k) => Number(k.mastered) > 0)) return "";
  return `Mastered: ${kinds.map((k) => `${str(k.phrase)} ${Number(k.mastered) || 0}`).join(" · ")}`;
}

// stepDistribution is how many students work on each step, and how many
// have done all nine, without names: "Step 1: 3 · Step 2: 5 · all nine: 2".
// Steps nobody is on are left out.
function stepDistribution(rows) {
  const at = new Map();
  for (const r of rows) {
    const current = Number(r.current);
    if (Number.isInteger(current) && current >= 0 && current <= 9) at.set(current, (at.get(current) || 0) + 1);
  }
  const parts = [];
  for (let s = 1; s <= 9; s++) if (at.get(s)) parts.push(`Step ${s}: ${at.get(s)}`);
  if (at.get(0)) parts.push(`all nine: ${at.get(0)}`);
  return parts.join(" · ");
}

function drawNames() {
  const items = names.map((n) => {
    const li = document.createElement("li");
    li.textContent = n;
    return li;
  });
  ui.names.replaceChildren(...items);
}

ui.toggle.addEventListener("click", () => {
  const show = ui.names.hidden;
  ui.names.hidden = !show;
  document.body.classList.toggle("names-shown", show);
  ui.toggle.setAttribute("aria-pressed", String(show));
  setText(ui.toggle, show ? "Hide names" : "Show names");
  if (show) drawNames();
});

ui.consoleLink.href = `/instructor/classes/${encodeURIComponent(classId)}`;

// ---- the debrief view ---------------------------------------------------------

const debrief = {
  shown: false, // the teacher chose to show the name
  name: "",
  view: null,
};

function debriefURL() {
  const q = new URLSearchParams({ size: "large" });
  if (debrief.shown) q.set("name", "1");
  return `/api/sessions/${encodeURIComponent(debriefId)}/diagram.svg?${q}`;
}

// debriefRows follows the session debriefed in the class's rows: its seq
// (the drawing is fetched again when it moves) and its name.
function debriefRows(rows) {
  if (!debrief.view) return;
  const row = rows.find((r) => str(r.id) === debriefId);
  if (!row) return;
  debrief.name = str(row.name);
  showWho();
  debrief.view.changed(num(row.seq));
}

function showWho() {
  setText(byId("debrief-who"), debrief.shown && debrief.name ? debrief.name : "a student's session");
}

if (debriefId) {
  document.body.classList.add("debriefing"); // diagram.css hides the join screen
  byId("debrief").hidden = false;
  byId("debrief-back").href = location.pathname;
  debrief.view = new DiagramView(byId("debrief-diagram"), { status: (t) => setText(byId("debrief-status"), t) });
  debrief.view.show(debriefURL());
  const toggle = byId("debrief-names");
  toggle.addEventListener("click", () => {
    debrief.shown = !debrief.shown;
    toggle.setAttribute("aria-pressed", String(debrief.shown));
    setText(toggle, debrief.shown ? "Hide the name" : "Show the name");
    showWho();
    debrief.view.show(debriefURL());
  });
}
loadClass()
  .catch(() => setText(ui.connection, "The lab server is not answering."))
  .finally(() => live.connect());
