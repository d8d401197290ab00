// Projector page of a class (/instructor/classes/{id}/projector): the join
// address, the code and its QR code in type readable from the back of a
// room, and a live count of the students who joined. Names are hidden by
// default (it is a shared screen); a toggle shows them. The count comes from
// the class-scoped instructor WebSocket's overview frames. Text goes through
// textContent only.

const byId = (id) => document.getElementById(id);
const classId = decodeURIComponent(location.pathname.split("/")[3] || "");
const RECONNECT_BASE_MS = 250;
const RECONNECT_CAP_MS = 10_000;

const ui = {
  title: byId("title"),
  url: byId("join-url"),
  code: byId("code"),
  closed: byId("closed"),
  qr: byId("qr"),
  count: byId("count"),
  countWord: byId("count-word"),
  toggle: byId("toggle-names"),
  names: byId("names"),
  consoleLink: byId("console-link"),
  connection: byId("connection"),
};

let failures = 0;
let names = [];

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

async function loadClass() {
  const resp = await fetch(`/api/classes/${encodeURIComponent(classId)}`, { credentials: "same-origin" });
  if (resp.status === 401) {
    location.assign("/instructor/login");
    return;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    setText(ui.title, typeof body.error === "string" ? body.error : `The class could not be loaded (${resp.status}).`);
    return;
  }
  const c = body.class || {};
  setText(ui.title, String(c.title || ""));
  document.title = `Join ${c.title || ""} · Tool-call outcomes lab`;
  setText(ui.url, String(c.joinUrl || "").replace(/\/j\/\d+$/, "/join"));
  setText(ui.code, String(c.code || ""));
  ui.closed.hidden = c.open !== false;
  ui.qr.src = `/api/classes/${encodeURIComponent(classId)}/qr.png?code=${encodeURIComponent(c.code || "")}`;
  showRows(Array.isArray(body.sessions) ? body.sessions : []);
}

function showRows(rows) {
  names = rows.map((r) => String(r.name || "")).sort((a, b) => a.localeCompare(b));
  setText(ui.count, String(names.length));
  setText(ui.countWord, names.length === 1 ? "student joined" : "students joined");
  if (!ui.names.hidden) drawNames();
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
  ui.toggle.setAttribute("aria-pressed", String(show));
  setText(ui.toggle, show ? "Hide names" : "Show names");
  if (show) drawNames();
});

function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}/instructor/ws?class=${encodeURIComponent(classId)}`);
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
    failures = 0;
    setText(ui.connection, "");
  });
  ws.addEventListener("message", (e) => {
    let frame;
    try {
      frame = JSON.parse(e.data);
    } catch {
      return;
    }
    if (frame?.type === "overview" && Array.isArray(frame.sessions)) showRows(frame.sessions);
  });
  ws.addEventListener("close", () => {
    if (!opened) failures += 1;
    setText(ui.connection, "Reconnecting…");
    const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(failures, 16));
    setTimeout(() => loadClass().catch(() => {}).finally(connect), Math.random() * ceiling);
  });
}

ui.consoleLink.href = `/instructor/classes/${encodeURIComponent(classId)}`;
loadClass()
  .catch(() => setText(ui.connection, "The lab server is not answering."))
  .finally(connect);
