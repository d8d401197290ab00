// Student page of the tool-call outcomes lab.
//
// All lab state lives on the server (see docs/protocol.md). This page only
// sends the student's actions over one WebSocket and renders each `state`
// frame it receives. It never parses replies itself, so what it shows is
// exactly what every other tab of the session shows.
//
// Rendering is keyed and incremental: held messages and receipts keep their
// elements between states, so a focused "Deliver message N" button stays the
// same focused element however many states arrive. All server text goes
// through textContent, never HTML. The helpers both pages use are in dom.js.

import {
  ConnectionIndicator,
  KeyedList,
  Reconnect,
  byId,
  list,
  setData,
  setText,
  socketURL,
  str,
  syncList,
} from "./dom.js";
import { chosenPrediction, clearPrediction, fillReceipt, initExercise, renderExercise } from "./exercise.js";

const ERROR_CLEAR_MS = 15_000;
// The protocol lets a server close the connection (1009) on a frame over
// 1 MiB; refusing such a frame here keeps the student connected and says why.
const MAX_FRAME_BYTES = 1 << 20;

const ui = {
  connection: byId("connection"),
  error: byId("error"),
  sessionId: byId("session-id"),
  start: byId("start"),
  runId: byId("run-id"),
  callId: byId("call-id"),
  status: byId("status"),
  detail: byId("detail"),
  notice: byId("notice"),
  reply: byId("reply"),
  queueReply: byId("queue-reply"),
  queueDeadline: byId("queue-deadline"),
  queue: byId("queue"),
  queueEmpty: byId("queue-empty"),
  receipts: byId("receipts"),
  receiptsEmpty: byId("receipts-empty"),
};

// The session id is the last path segment of /lab/{id}; a reload keeps it.
const sessionId = (/^\/lab\/([^/]+)\/?$/.exec(location.pathname) ?? [])[1] ?? "";

const conn = {
  socket: null,
  everConnected: false,
  gotState: false,
  lastSeq: -1, // highest seq rendered on the current socket
  sent: 0, // frames this tab has sent, to tell which state follows an action
  // A connection that ended without delivering a state counts as a failure
  // for the backoff, so a server that accepts and drops at once is not
  // hammered.
  retry: new Reconnect(connect),
  tickTimer: 0, // the countdown's interval while a retry is pending
};

const errorState = { timer: 0, sentWhenShown: 0 };

const draft = {
  seenFirst: false,
  filled: null, // the draft this tab last put into #reply
  last: null, // the draft of the last rendered state
  startFrom: null, // draft before this tab's own "Start new run", until it changes
};

// The held-message list, keyed by message id; each row is
// { el, origin, label, button }.
const queueRows = new KeyedList(ui.queue, { make: makeQueueRow, update: updateQueueRow });

// ---- errors ---------------------------------------------------------------

function showError(text) {
  setText(ui.error, text);
  errorState.sentWhenShown = conn.sent;
  clearTimeout(errorState.timer);
  errorState.timer = setTimeout(clearError, ERROR_CLEAR_MS);
}

function clearError() {
  clearTimeout(errorState.timer);
  setText(ui.error, "");
}

// ---- connection -----------------------------------------------------------

const indicator = new ConnectionIndicator(ui.connection);
const showConnection = (...args) => indicator.show(...args);

function connect() {
  stopRetry();
  showConnection("connecting", conn.everConnected ? "Reconnecting…" : "Connecting…");
  const ws = new WebSocket(socketURL(`/lab/${encodeURIComponent(sessionId)}/ws`));
  conn.socket = ws;
  conn.gotState = false;
  // A new connection may reach a restarted server whose seq starts again, so
  // the ordering guard only applies within one connection.
  conn.lastSeq = -1;

  ws.addEventListener("open", () => {
    if (conn.socket !== ws) return;
    conn.everConnected = true;
    showConnection("connected", "Connected");
  });
  ws.addEventListener("message", (event) => {
    if (conn.socket === ws) receive(event.data);
  });
  ws.addEventListener("close", (event) => {
    if (conn.socket !== ws) return;
    conn.socket = null;
    if (event.code === 1009) {
      showError(
        "The server closed the connection because a message was too large. The action was not applied.",
      );
    }
    scheduleReconnect();
  });
  // An "error" event is always followed by "close", which handles it.
}

function scheduleReconnect() {
  conn.retry.schedule(conn.gotState);
  conn.tickTimer = setInterval(showCountdown, 250);
  showCountdown();
}

function showCountdown() {
  const left = conn.retry.at - Date.now();
  // Under a second a countdown would only flicker.
  const countdown = left > 1000 ? ` in ${Math.ceil(left / 1000)} s` : "";
  showConnection("waiting", "Reconnecting", countdown, "…");
}

function stopRetry() {
  conn.retry.cancel();
  clearInterval(conn.tickTimer);
  conn.tickTimer = 0;
}

function send(frame, action) {
  const ws = conn.socket;
  if (!ws || ws.readyState !== WebSocket.OPEN) {
    showError(
      `Not connected: “${action}” was not sent. The page reconnects by itself; try again when it says Connected.`,
    );
    return false;
  }
  const text = JSON.stringify(frame);
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_FRAME_BYTES) {
    showError(`Not sent: “${action}” would send ${bytes} bytes, more than the lab accepts.`);
    return false;
  }
  ws.send(text);
  conn.sent += 1;
  return true;
}

function receive(data) {
  let frame;
  try {
    frame = JSON.parse(data);
  } catch {
    showError("The server sent a message this page cannot read.");
    return;
  }
  if (frame?.type === "state") {
    const seq = typeof frame.seq === "number" ? frame.seq : 0;
    if (seq < conn.lastSeq) return; // an older state overtaken by a newer one
    conn.lastSeq = seq;
    conn.gotState = true;
    render(frame);
  } else if (frame?.type === "error") {
    showError(str(frame.error) || "The server refused the last action.");
  }
  // Other frame types may be added to the protocol later; ignore them.
}

// ---- rendering ------------------------------------------------------------

function render(state) {
  // The first state after one of this tab's own actions means that action
  // went through, so an older error no longer describes the page.
  if (ui.error.textContent !== "" && conn.sent > errorState.sentWhenShown) clearError();

  const call = state.call ?? {};
  setText(ui.runId, str(call.runId));
  setText(ui.callId, str(call.callId));
  setText(ui.status, str(call.status));
  setData(ui.status, "status", str(call.status));
  setText(ui.detail, str(call.detail));
  setText(ui.notice, str(state.notice));
  renderQueue(list(state.queue));
  renderReceipts(list(state.receipts));
  renderDraft(str(state.draft));
  renderName(str(state.name));
  renderExercise(state);
}

function renderDraft(next) {
  if (!draft.seenFirst) {
    draft.seenFirst = true;
    fillReply(next);
  } else if (draft.startFrom !== null) {
    // This tab started a run: show the new run's default completion, as the
    // seed did, once the state that carries it arrives.
    if (next !== draft.startFrom) {
      draft.startFrom = null;
      fillReply(next);
    }
  } else if (next !== draft.last && ui.reply.value === draft.filled) {
    // Another tab changed the run and the student has not touched our draft.
    fillReply(next);
  }
  draft.last = next;
}

function fillReply(text) {
  if (ui.reply.value !== text) ui.reply.value = text;
  draft.filled = text;
}

function renderQueue(items) {
  const shown = queueRows.render(items, (item) => {
    const id = Number(item?.id);
    return Number.isSafeInteger(id) ? id : undefined;
  });
  ui.queueEmpty.hidden = shown > 0;
}

function makeQueueRow(id) {
  const li = document.createElement("li");
  const origin = document.createElement("span");
  origin.className = "origin";
  origin.textContent = "(from instructor)";
  origin.hidden = true;
  const label = document.createElement("p");
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.messageId = String(id);
  button.textContent = `Deliver message ${id}`;
  li.append(origin, label, button);
  return { el: li, origin, label, button };
}

function updateQueueRow(row, item, id) {
  // The student's own messages are numbered 1, 2, … and the instructor's
  // I1, I2, … (the frame's number), so the walkthrough's "message 2" is
  // always the student's second; the id stays what deliver sends.
  const number = str(item.number) || String(id);
  setText(row.label, `Message ${number}: ${str(item.label)}`);
  setText(row.button, `Deliver message ${number}`);
  const fromInstructor = item.from === "instructor";
  row.el.classList.toggle("from-instructor", fromInstructor);
  if (row.origin.hidden === fromInstructor) row.origin.hidden = !fromInstructor;
  setData(row.el, "kind", str(item.kind));
}

function renderReceipts(items) {
  syncList(ui.receipts, items, fillReceipt);
  ui.receiptsEmpty.hidden = items.length > 0;
}

// ---- controls -------------------------------------------------------------

ui.start.addEventListener("click", () => {
  const before = draft.last ?? "";
  if (send({ type: "start" }, "Start new run")) draft.startFrom = before;
});

ui.queueReply.addEventListener("click", () => {
  send({ type: "queueReply", raw: ui.reply.value }, "Queue reply");
});

ui.queueDeadline.addEventListener("click", () => {
  send({ type: "queueDeadline" }, "Queue deadline");
});

// One listener for every Deliver button, so that buttons need no per-element
// wiring and stay plain native buttons (Enter and Space both click them).
ui.queue.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-message-id]");
  if (!button || !ui.queue.contains(button)) return;
  const id = Number(button.dataset.messageId);
  const predict = chosenPrediction();
  const frame = predict ? { type: "deliver", message: id, predict } : { type: "deliver", message: id };
  if (send(frame, button.textContent)) clearPrediction();
});

// ---- display name -----------------------------------------------------------

const nameInput = byId("name");

// renderName shows the session's name unless the student is editing it.
function renderName(name) {
  if (document.activeElement !== nameInput && nameInput.value !== name) nameInput.value = name;
}

byId("name-form").addEventListener("submit", (event) => {
  event.preventDefault();
  send({ type: "rename", name: nameInput.value }, "Set name");
});

// Coming back online is a good moment to retry without waiting out the backoff.
window.addEventListener("online", () => {
  if (conn.retry.pending) connect();
});

setText(ui.sessionId, sessionId);
initExercise();
if (sessionId === "") {
  showConnection("waiting", "Not connected");
  showError("This page needs a session address such as /lab/<id>. Use “New session” to get one.");
} else {
  connect();
}
