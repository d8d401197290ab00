// Projector page of a class (/instructor/classes/{id}/projector): the join
// address, the code and its QR code in type readable from the back of a
// room, and a live count of the students who joined. Names are hidden by
// default (it is a shared screen); a toggle shows them. The count comes from
// the class-scoped instructor WebSocket's overview frames. Text goes through
// textContent only (dom.js).

import { Reconnect, byId, list, setText, socketURL, str } from "./dom.js";

const classId = decodeURIComponent(location.pathname.split("/")[3] || "");

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

let names = [];
const retry = new Reconnect(() => loadClass().catch(() => {}).finally(connect));

async function loadClass() {
  const resp = await fetch(`/api/classes/${encodeURIComponent(classId)}`, { credentials: "same-origin" });
  if (resp.status === 401) {
    location.assign("/instructor/login");
    return;
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    setText(ui.title, str(body.error) || `The class could not be loaded (${resp.status}).`);
    return;
  }
  const c = body.class || {};
  setText(ui.title, str(c.title));
  document.title = `Join ${str(c.title)} · Tool-call outcomes lab`;
  setText(ui.url, str(c.joinUrl).replace(/\/j\/\d+$/, "/join"));
  setText(ui.code, str(c.code));
  ui.closed.hidden = c.open !== false;
  // The code in the address makes a new code (after a reopen) a new image.
  ui.qr.src = `/api/classes/${encodeURIComponent(classId)}/qr.png?code=${encodeURIComponent(str(c.code))}`;
  showRows(list(body.sessions));
}

function showRows(rows) {
  names = rows.map((r) => str(r.name)).sort((a, b) => a.localeCompare(b));
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
  const ws = new WebSocket(socketURL(`/instructor/ws?class=${encodeURIComponent(classId)}`));
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
    setText(ui.connection, "");
  });
  ws.addEventListener("message", (e) => {
    let frame;
    try {
      frame = JSON.parse(e.data);
    } catch {
      return;
    }
    if (frame?.type === "overview") showRows(list(frame.sessions));
  });
  ws.addEventListener("close", () => {
    setText(ui.connection, "Reconnecting…");
    retry.schedule(opened);
  });
}

ui.consoleLink.href = `/instructor/classes/${encodeURIComponent(classId)}`;
loadClass()
  .catch(() => setText(ui.connection, "The lab server is not answering."))
  .finally(connect);
