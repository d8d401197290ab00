// Student page of the tool-call outcomes lab.
//
// All lab state lives on the server (see docs/protocol.md). This page only
// sends the student's actions over one WebSocket and renders each `state`
// frame it receives, so what it shows is exactly what every other tab of the
// session shows. The one thing it parses itself is the reply being typed,
// with the browser's own JSON.parse (the parser the seed's client uses), to
// say where it breaks before it is queued; a broken reply can still be
// queued, because delivering one is part of the lesson.
//
// The current call stays in view (a sticky bar) with what the last action did
// and what the instructor did. Held messages are shown newest first, those
// still waiting apart from those delivered (a message stays held after a
// delivery and can be delivered again).
//
// Rendering is keyed and incremental: a held message keeps its element
// between states, even when it moves from "Waiting" to "Delivered", so a
// focused "Deliver message N" button stays the same focused element however
// many states arrive. All server text goes through textContent, never HTML.
// The helpers both pages use are in dom.js.
//
// With ?observe in the address (the console's link), the page is an
// instructor's read-only view: it follows the session through the
// instructor's WebSocket and sends nothing, so nothing is recorded as the
// student's.

import {
  ConnectionIndicator,
  LiveSocket,
  byId,
  list,
  placeInOrder,
  setData,
  setText,
  str,
  syncList,
} from "./dom.js";
import {
  chosenPrediction,
  clearPrediction,
  fillReceipt,
  initExercise,
  predictionMissing,
  renderExercise,
} from "./exercise.js";
import { initPractice, practicePending, practiceRefused, renderPractice } from "./practice.js";
import { diagramSection } from "./diagram.js";
import { codeLive, codeRefused, initCode, renderCode } from "./code.js";

// PREDICTION_REQUIRED is what the page says when the class requires a
// prediction and a delivery had none (the error frame's reason
// prediction_required, or caught before sending).
const PREDICTION_REQUIRED =
  "Your class asks you to predict first: choose what you expect the notice to be (Accepted, Ignored, Unresolved or Invalid), then deliver again.";
// PRACTICE_PREDICTION is what it says when the message was a practice,
// which is always predicted first (practice.js).
const PRACTICE_PREDICTION =
  "This message is a practice: choose what you expect the notice to be under Practice, then deliver it there.";

const ERROR_CLEAR_MS = 15_000;
// The protocol lets a server close the connection (1009) on a frame over
// 1 MiB; refusing such a frame here keeps the student connected and says why.
const MAX_FRAME_BYTES = 1 << 20;
// A "Start new run" that has not come back within this long no longer holds
// off another one (the state may have been lost with the connection).
const START_HOLD_MS = 3_000;
// A start is held off at least this long, even once its state is back: a
// fast server answers inside a double click, whose second click must not
// start a second run.
const START_MIN_HOLD_MS = 700;
// The longest a held message's text is quoted in a note.
const NOTE_LABEL_CHARS = 80;
const NAME_MAX = 40;

const ui = {
  connection: byId("connection"),
  ended: byId("ended"),
  error: byId("error"),
  feedback: byId("feedback"),
  instructorNote: byId("instructor-note"),
  observer: byId("observer"),
  sessionId: byId("session-id"),
  start: byId("start"),
  runId: byId("run-id"),
  callId: byId("call-id"),
  status: byId("status"),
  detail: byId("detail"),
  notice: byId("notice"),
  reply: byId("reply"),
  replyCheck: byId("reply-check"),
  replyWhere: byId("reply-where"),
  queueReply: byId("queue-reply"),
  queueDeadline: byId("queue-deadline"),
  resetReply: byId("reset-reply"),
  heldHeading: byId("held-heading"),
  queue: byId("queue"),
  queueEmpty: byId("queue-empty"),
  waitingCount: byId("waiting-count"),
  delivered: byId("delivered"),
  deliveredEmpty: byId("delivered-empty"),
  deliveredCount: byId("delivered-count"),
  receipts: byId("receipts"),
  receiptsEmpty: byId("receipts-empty"),
  name: byId("name"),
  nameHint: byId("name-hint"),
  nameCount: byId("name-count"),
  newSession: byId("new-session"),
  newSessionDialog: byId("new-session-dialog"),
  newSessionAddress: byId("new-session-address"),
  newSessionCancel: byId("new-session-cancel"),
  newSessionConfirm: byId("new-session-confirm"),
  newSessionClass: byId("new-session-class"),
  newSessionClassTitle: byId("new-session-class-title"),
  classTitle: byId("class-title"),
  notices: byId("notices"),
};

// The session id is the last path segment of /lab/{id}; a reload keeps it.
const sessionId = (/^\/lab\/([^/]+)\/?$/.exec(location.pathname) ?? [])[1] ?? "";
const observing = new URLSearchParams(location.search).has("observe");
// The "Diagram" section beside the receipts (diagram.js): fetched again as
// states arrive, while it is open.
const diagram = sessionId === "" ? null : diagramSection(byId("diagram"), `/lab/${encodeURIComponent(sessionId)}/diagram.svg`);

const conn = {
  gotState: false,
  lastSeq: -1, // highest seq rendered on the current socket
  sent: 0, // frames this tab has sent, to tell which state follows an action
  refusal: "", // why the lab refused the last connection, shown instead of "Reconnecting"
};

// kind is "offline" for a "Not connected" message, which a reconnection
// makes untrue, "" for others.
const errorState = { timer: 0, sentWhenShown: 0, kind: "" };

const draft = {
  seenFirst: false,
  filled: null, // the draft this tab last put into #reply
  last: null, // the draft of the last rendered state
  startFrom: null, // draft before this tab's own "Start new run", until it changes
};

// What the last rendered state held, to tell what a new state adds.
const seen = {
  first: true, // no state rendered yet: nothing in it is news
  queued: 0, // held messages
  receipts: 0, // receipts
};

// This tab's own actions waiting for their state.
const mine = {
  startAt: 0, // Date.now() of an unanswered "Start new run", 0 if none
  startTimer: 0,
  queued: [], // { sentAt, invalid } per queue frame sent, in order
};

// The held messages, keyed by message id; each row is
// { el, origin, label, button }. One map for both lists, so a row keeps its
// element when it moves from waiting to delivered.
const rows = new Map();

// ---- errors and notes -------------------------------------------------------

function showError(text, kind = "") {
  stamp(ui.error);
  setText(ui.error, text);
  errorState.sentWhenShown = conn.sent;
  errorState.kind = kind;
  clearTimeout(errorState.timer);
  errorState.timer = setTimeout(clearError, ERROR_CLEAR_MS);
}

function clearError() {
  clearTimeout(errorState.timer);
  errorState.kind = "";
  setText(ui.error, "");
}

// Notes quote identifiers ("run-2/lookup"); they are written in tokens like
// the held messages, so that an identifier never breaks over two lines.
function showNote(node, text) {
  if (node.textContent === text) return;
  stamp(node);
  fillJSON(node, text);
}

// stamp marks node as the newest notice (stackNotices).
let noticeClock = 0;
function stamp(node) {
  node.dataset.at = String(++noticeClock);
}

function showFeedback(text) {
  showNote(ui.feedback, text);
}

// showInstructorNote says what the instructor did, visibly in the bar and to
// screen readers (a polite live region); it stays until the student acts.
function showInstructorNote(text) {
  showNote(ui.instructorNote, text);
}

const quote = (text) => (text.length > NOTE_LABEL_CHARS ? `${text.slice(0, NOTE_LABEL_CHARS)}…` : text);

// ---- connection -----------------------------------------------------------

const indicator = new ConnectionIndicator(ui.connection);
const showConnection = (...args) => indicator.show(...args);

// CLOSE_DELETED is the close code of a session an instructor deleted
// (docs/protocol.md): reconnecting would only start an empty session at the
// same address, so the page stops and says so.
const CLOSE_DELETED = 4001;

// The socket (dom.js LiveSocket). A connection that ended without
// delivering a state counts as a failure for the backoff, so a server that
// accepts and drops at once is not hammered. It stops for good when the
// session was deleted, or when observing without an instructor login.
const live = new LiveSocket(observing ? "/instructor/ws" : `/lab/${encodeURIComponent(sessionId)}/ws`, {
  succeedOnOpen: false,
  status: (state) => {
    if (state === "connecting") showConnection("connecting", live.everConnected ? "Reconnecting…" : "Connecting…");
    else if (state === "connected") showConnection("connected", "Connected");
    else showCountdown();
  },
  opened: () => {
    // A new connection may reach a restarted server whose seq starts again,
    // so the ordering guard only applies within one connection.
    conn.gotState = false;
    conn.lastSeq = -1;
    if (observing) live.send(JSON.stringify({ type: "watch", session: sessionId }));
  },
  frame: receive,
  unreadable: () => showError("The server sent a message this page cannot read."),
  closed: (event) => {
    endStartHold();
    conn.refusal = refusalText(event);
    if (event.code === 1009) {
      showError(
        "The server closed the connection because a message was too large. The action was not applied.",
      );
    }
    if (event.code === CLOSE_DELETED && !observing) showDeleted();
  },
  login: observing
    ? {
        probe: "/api/sessions",
        unopenedOnly: true,
        ended: () => {
          showConnection("waiting", "Not connected");
          showError("Log in to the instructor console to observe this session.");
        },
      }
    : undefined,
});

// showDeleted stops reconnecting and says, in words, that the session is
// gone, with where to go next: the join page for a class's session (the
// page showed a class title), the lab's start for the open lab.
function showDeleted() {
  live.stop();
  showConnection("waiting", "Session deleted");
  const inClass = byId("class-title")?.hidden === false;
  const link = document.createElement("a");
  link.id = "ended-link";
  link.href = inClass ? "/join" : "/";
  link.textContent = inClass ? "Join your class again" : "Start a new session";
  ui.ended.replaceChildren(
    document.createTextNode(
      "Your instructor deleted this session, so the lab no longer keeps it and this page has stopped connecting. ",
    ),
    link,
  );
  ui.ended.hidden = false;
}

// refusalText is what the page says when the lab refused the connection
// ("The lab is full right now…"): the server accepts the upgrade and closes
// it at once with 1013 and its reason (docs/protocol.md), since a page
// cannot read the answer to a refused upgrade. "" for any other close.
function refusalText(event) {
  if (event.code !== 1013 || !event.reason) return "";
  return event.reason.charAt(0).toUpperCase() + event.reason.slice(1);
}

function showCountdown() {
  const left = live.retryAt - Date.now();
  // Under a second a countdown would only flicker.
  const countdown = left > 1000 ? ` in ${Math.ceil(left / 1000)} s` : "";
  if (conn.refusal) {
    showConnection("waiting", `${conn.refusal} (next try`, countdown || " now", ")");
    return;
  }
  showConnection("waiting", "Reconnecting", countdown, "…");
}

function send(frame, action) {
  if (observing) {
    showError(`Read only: “${action}” was not sent. This instructor view cannot act for the student.`);
    return false;
  }
  if (live.stopped && !ui.ended.hidden) {
    showError(`Not sent: “${action}”. This session was deleted; follow the link above.`);
    return false;
  }
  if (!live.open) {
    showError(
      `Not connected: “${action}” was not sent. The page reconnects by itself; try again when it says Connected.`,
      "offline",
    );
    return false;
  }
  const text = JSON.stringify(frame);
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_FRAME_BYTES) {
    showError(`Not sent: “${action}” would send ${bytes} bytes, more than the lab accepts.`);
    return false;
  }
  live.send(text);
  conn.sent += 1;
  // The student acting is the moment an older note about the instructor
  // has been read.
  showInstructorNote("");
  return true;
}

function receive(frame) {
  if (frame?.type === "state") {
    if (observing && frame.session !== sessionId) return;
    const seq = typeof frame.seq === "number" ? frame.seq : 0;
    if (seq < conn.lastSeq) return; // an older state overtaken by a newer one
    conn.lastSeq = seq;
    // A state on a new connection means the page is connected again: a
    // "Not connected" message is no longer true.
    if (!conn.gotState && errorState.kind === "offline") clearError();
    conn.gotState = true;
    live.succeeded();
    render(frame);
    diagram?.changed(seq);
  } else if (frame?.type === "compiled" || frame?.type === "typeAt" || (frame?.type === "error" && typeof frame.id === "number")) {
    // The compiler as the student types (live.js): never a change, and
    // its refusals are said quietly under the editor.
    codeLive(frame);
  } else if (frame?.type === "error") {
    // A refused frame: whatever this tab was waiting for will not come.
    endStartHold();
    mine.queued.shift();
    codeRefused(frame);
    practiceRefused();
    if (frame.reason === "prediction_required") showError(practicePending() ? PRACTICE_PREDICTION : PREDICTION_REQUIRED);
    else showError(str(frame.error) || "The server refused the last action.");
  }
  // Other frame types (and the instructor socket's overview and timeline)
  // are not this page's.
}

// ---- rendering ------------------------------------------------------------

function render(state) {
  // The first state after one of this tab's own actions means that action
  // went through, so an older error no longer describes the page.
  if (ui.error.textContent !== "" && conn.sent > errorState.sentWhenShown) clearError();

  const call = state.call ?? {};
  if (str(call.runId) !== ui.runId.textContent) endStartHold();
  setText(ui.runId, str(call.runId));
  setText(ui.callId, str(call.callId));
  setText(ui.status, str(call.status));
  setData(ui.status, "status", str(call.status));
  setText(ui.detail, str(call.detail));
  ui.detail.title = str(call.detail);
  setText(ui.notice, str(state.notice));
  const queue = list(state.queue);
  const receipts = list(state.receipts);
  // A row keeps its element, but moving it to the other list blurs it: the
  // focus is given back to the same element.
  const focused = document.activeElement;
  renderQueue(queue, receipts);
  renderReceipts(receipts);
  if (focused && focused !== document.activeElement && focused.isConnected) focused.focus({ preventScroll: true });
  announce(queue, receipts, call);
  renderDraft(str(state.draft));
  renderName(str(state.name));
  renderExercise(state);
  renderPractice(state);
  renderCode(state);
}

// announce says what the new state adds: the instructor's messages and
// deliveries in the instructor note, this tab's own queued messages in the
// feedback line. Nothing in the first state is news.
// numberOf is how the student sees a message's number: their own 1, 2, …
// and the instructor's I1, I2, … (the frame's number); the id otherwise.
const numberOf = (item, id) => str(item?.number) || String(id ?? "?");

function announce(queue, receipts, call) {
  const newMessages = queue.slice(seen.queued);
  const newReceipts = receipts.slice(seen.receipts);
  const first = seen.first;
  seen.first = false;
  seen.queued = queue.length;
  seen.receipts = receipts.length;
  if (first) return;

  const notes = [];
  const delivered = new Set(newReceipts.filter((r) => r?.by === "instructor").map((r) => r.message));
  for (const m of newMessages) {
    if (m?.from === "instructor" && !delivered.has(m.id)) {
      const what = m.kind === "deadline" ? quote(str(m.label)) : describeReply(str(m.label), call);
      notes.push(`Your instructor added message ${numberOf(m, m?.id)} (${what}) to your waiting messages.`);
    }
  }
  for (const r of newReceipts) {
    if (r?.by === "instructor") notes.push(`Your instructor delivered message ${numberOf(r, r?.message)}: ${str(r.notice)}`);
  }
  if (notes.length > 0) showInstructorNote(notes.join(" "));

  for (const m of newMessages) {
    if (m?.from !== "student") continue;
    const sent = mine.queued.shift();
    if (!sent) continue; // queued by another tab of the session
    if (m.kind === "deadline") {
      showFeedback(`Queued message ${numberOf(m, m?.id)} (${str(m.label)}). It waits until you deliver it.`);
    } else if (sent.invalid) {
      showFeedback(
        `Queued message ${numberOf(m, m?.id)}, which is not valid JSON. Deliver it to see how the client treats a malformed reply.`,
      );
    } else {
      showFeedback(`Queued message ${numberOf(m, m?.id)}. It waits until you deliver it.`);
    }
  }
  for (const r of newReceipts) {
    if (r?.by !== "instructor") showFeedback(`Delivered message ${numberOf(r, r?.message)}: ${str(r.notice)}`);
  }
}

// describeReply says what an instructor's held reply is, as the lesson
// names it ("a stale reply for run-1"), so that the note tells the student
// what to look at; the held message shows the text itself.
function describeReply(raw, call) {
  let v;
  try {
    v = JSON.parse(raw);
  } catch {
    return "text that is not JSON";
  }
  if (!v || typeof v !== "object" || Array.isArray(v) || typeof v.runId !== "string" || typeof v.callId !== "string") {
    return "JSON that is not a reply";
  }
  let what = "";
  if (v.kind === "completed" && typeof v.output === "string") what = "completion";
  else if (v.kind === "rejected" && typeof v.reason === "string") what = "rejection";
  else return "a reply of the wrong shape";
  const runId = str(call?.runId);
  if (v.callId !== str(call?.callId)) return `a ${what} for another callId, ${v.runId}/${v.callId}`;
  if (v.runId !== runId) {
    return runOrder(v.runId) < runOrder(runId) ? `a stale ${what} for ${v.runId}` : `a ${what} for another run, ${v.runId}`;
  }
  if (["Completed", "Rejected"].includes(str(call?.status))) return `a ${what} for ${runId}, whose call is already final`;
  if (what === "completion" && v.output === "") return `a completion for ${runId} with an empty output`;
  return `a ${what} for ${runId}`;
}

// runOrder is N of "run-N", Infinity for an id of another shape.
function runOrder(id) {
  const m = /^run-(\d+)$/.exec(id);
  return m ? Number(m[1]) : Infinity;
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
  checkReply();
}

// renderQueue shows each held message once: in "Waiting" until its first
// delivery, then in "Delivered", newest first in both.
function renderQueue(items, receipts) {
  const deliveredIds = new Set(receipts.map((r) => r?.message));
  const waiting = [];
  const done = [];
  const keep = new Set();
  for (const item of items) {
    const id = Number(item?.id);
    if (!Number.isSafeInteger(id) || keep.has(id)) continue;
    keep.add(id);
    let row = rows.get(id);
    if (!row) {
      row = makeQueueRow(id);
      rows.set(id, row);
    }
    updateQueueRow(row, item, id);
    (deliveredIds.has(id) ? done : waiting).push(row.el);
  }
  for (const [id, row] of rows) {
    if (!keep.has(id)) {
      row.el.remove();
      rows.delete(id);
    }
  }
  waiting.reverse();
  done.reverse();
  placeInOrder(ui.queue, waiting);
  placeInOrder(ui.delivered, done);
  ui.queueEmpty.hidden = waiting.length > 0;
  ui.deliveredEmpty.hidden = done.length > 0;
  setText(ui.waitingCount, `(${waiting.length})`);
  setText(ui.deliveredCount, `(${done.length})`);
}

function makeQueueRow(id) {
  const li = document.createElement("li");
  li.dataset.messageId = String(id);
  const origin = document.createElement("span");
  origin.className = "origin";
  origin.textContent = "(from instructor)";
  origin.hidden = true;
  const label = document.createElement("p");
  label.className = "json";
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.messageId = String(id);
  button.textContent = `Deliver message ${id}`;
  li.append(origin, label, button);
  return { el: li, origin, label, button, text: null };
}

function updateQueueRow(row, item, id) {
  // The student's own messages are numbered 1, 2, … and the instructor's
  // I1, I2, … (the frame's number), so the walkthrough's "message 2" is
  // always the student's second; the id stays what deliver sends.
  const number = str(item.number) || String(id);
  const text = `Message ${number}: ${str(item.label)}`;
  if (row.text !== text) {
    row.text = text;
    fillJSON(row.label, text);
  }
  setText(row.button, `Deliver message ${number}`);
  const fromInstructor = item.from === "instructor";
  row.el.classList.toggle("from-instructor", fromInstructor);
  if (row.origin.hidden === fromInstructor) row.origin.hidden = !fromInstructor;
  setData(row.el, "kind", str(item.kind));
}

// fillJSON writes text into node so that lines break between JSON tokens,
// never inside one: each string or bare word (up to 40 characters) that
// starts after a delimiter is its own box (.tok), and every comma and colon
// is followed by a break opportunity. A box wider than the line still wraps
// inside, so nothing scrolls sideways.
function fillJSON(node, text) {
  const parts = [];
  const token = /"(?:[^"\\\n]|\\.){0,40}"|[^\s",:{}[\]]{1,40}(?=[\s",:{}[\]]|$)/y;
  const delimiter = /[\s,:{}[\]]/;
  let plain = "";
  let boundary = true; // at the start, or just after a delimiter or a token
  let i = 0;
  const flush = () => {
    if (plain) parts.push(document.createTextNode(plain));
    plain = "";
  };
  while (i < text.length) {
    if (boundary) {
      token.lastIndex = i;
      const m = token.exec(text);
      if (m && m[0].length > 1) {
        flush();
        const span = document.createElement("span");
        span.className = "tok";
        span.textContent = m[0];
        parts.push(span);
        i += m[0].length;
        continue;
      }
    }
    const ch = text[i];
    plain += ch;
    i += 1;
    boundary = delimiter.test(ch);
    if (ch === "," || ch === ":") {
      flush();
      parts.push(document.createElement("wbr"));
    }
  }
  flush();
  node.replaceChildren(...parts);
}

function renderReceipts(items) {
  // Newest first; the list is <ol reversed>, so numbers still count up from
  // the first delivery. Each receipt: the seed's notice, why, the verdict on
  // a prediction (exercise.js), and a "by instructor" mark.
  const newestFirst = [...items].reverse();
  syncList(ui.receipts, newestFirst, (li, receipt) => {
    fillReceipt(li, receipt);
    let by = li.querySelector(".origin");
    if (!by) {
      by = document.createElement("span");
      by.className = "origin";
      by.textContent = "by instructor";
      li.append(by);
    }
    const byInstructor = receipt?.by === "instructor";
    li.classList.toggle("by-instructor", byInstructor);
    if (by.hidden === byInstructor) by.hidden = !byInstructor;
  });
  ui.receiptsEmpty.hidden = items.length > 0;
}

// ---- the reply, checked as it is typed ----------------------------------------

// jsonProblem returns where text stops being JSON, as JSON.parse says it, or
// null for valid JSON: { message, index } with index the UTF-16 offset of
// the problem (text.length for an early end), or -1 when the browser's
// message names no position.
function jsonProblem(text) {
  try {
    JSON.parse(text);
    return null;
  } catch (err) {
    const message = String(err?.message ?? err);
    const at = /at position (\d+)/.exec(message);
    let index = at ? Number(at[1]) : -1;
    if (index < 0 && /end of JSON input/i.test(message)) index = text.length;
    return { message, index };
  }
}

function checkReply() {
  const text = ui.reply.value;
  const problem = jsonProblem(text);
  if (!problem) {
    setData(ui.replyCheck, "valid", "true");
    setText(ui.replyCheck, "Valid JSON.");
    ui.reply.removeAttribute("aria-invalid");
    ui.replyWhere.replaceChildren();
    return true;
  }
  setData(ui.replyCheck, "valid", "false");
  setText(ui.replyCheck, "Not valid JSON. You can still queue it: delivering it shows how the client treats it.");
  ui.reply.setAttribute("aria-invalid", "true");
  const parts = [document.createTextNode(`${problem.message}.`)];
  if (problem.index >= 0) {
    const before = text.slice(0, problem.index);
    const line = before.split("\n").length;
    const column = problem.index - before.lastIndexOf("\n");
    // Chromium's message gives the line and column too; others may not.
    const said = /line \d+ column \d+/i.test(problem.message);
    parts.push(document.createTextNode(said ? " " : ` Line ${line}, column ${column}: `));
    const code = document.createElement("code");
    const start = Math.max(0, problem.index - 24);
    const mark = document.createElement("mark");
    mark.textContent = text.slice(problem.index, problem.index + 1) || "(end)";
    code.append(
      `${start > 0 ? "…" : ""}${text.slice(start, problem.index)}`,
      mark,
      `${text.slice(problem.index + 1, problem.index + 16)}${problem.index + 16 < text.length ? "…" : ""}`,
    );
    parts.push(code);
  }
  ui.replyWhere.replaceChildren(...parts);
  return false;
}

ui.reply.addEventListener("input", checkReply);

// ---- controls -------------------------------------------------------------

// A start is held off until its state comes back (or START_HOLD_MS pass),
// and for START_MIN_HOLD_MS in any case, so a double click starts one run,
// not two, however fast the server answers. The button stays focusable.
function endStartHold() {
  if (mine.startAt === 0) return;
  clearTimeout(mine.startTimer);
  const left = mine.startAt + START_MIN_HOLD_MS - Date.now();
  if (left > 0) {
    mine.startTimer = setTimeout(endStartHold, left);
    return;
  }
  mine.startAt = 0;
  ui.start.removeAttribute("aria-disabled");
}

function startRun() {
  if (mine.startAt !== 0) return;
  const before = draft.last ?? "";
  if (!send({ type: "start" }, "Start new run")) return;
  draft.startFrom = before;
  mine.startAt = Date.now();
  ui.start.setAttribute("aria-disabled", "true");
  mine.startTimer = setTimeout(() => {
    mine.startAt = Date.now() - START_MIN_HOLD_MS;
    endStartHold();
  }, START_HOLD_MS);
  showFeedback("");
}

function queueReply() {
  const invalid = !checkReply();
  if (send({ type: "queueReply", raw: ui.reply.value }, "Queue reply")) {
    mine.queued.push({ invalid });
  }
}

function queueDeadline() {
  if (send({ type: "queueDeadline" }, "Queue deadline")) mine.queued.push({ invalid: false });
}

ui.start.addEventListener("click", startRun);
ui.queueReply.addEventListener("click", queueReply);
ui.queueDeadline.addEventListener("click", queueDeadline);
ui.resetReply.addEventListener("click", () => {
  if (draft.last !== null) fillReply(draft.last);
  ui.reply.focus();
});

// One listener for every Deliver button of both lists, so that buttons need
// no per-element wiring and stay plain native buttons (Enter and Space both
// click them).
for (const parent of [ui.queue, ui.delivered]) {
  parent.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-message-id]");
    if (!button || !parent.contains(button)) return;
    const id = Number(button.dataset.messageId);
    if (predictionMissing()) {
      showError(PREDICTION_REQUIRED);
      return;
    }
    const predict = chosenPrediction();
    const frame = predict ? { type: "deliver", message: id, predict } : { type: "deliver", message: id };
    if (send(frame, button.textContent)) clearPrediction();
  });
}

// ---- keyboard shortcuts -------------------------------------------------------

// Alt+Shift+letter everywhere except in a text field (where Alt+Shift may
// type a character on some keyboards), and Ctrl+Enter in the reply. They are
// listed on the page (and in aria-keyshortcuts).
document.addEventListener("keydown", (event) => {
  if (event.target === ui.reply && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    queueReply();
    return;
  }
  if (!event.altKey || !event.shiftKey || event.ctrlKey || event.metaKey) return;
  if (event.target.closest?.("input, textarea, select, [contenteditable]")) return;
  const action = {
    KeyN: () => {
      ui.start.focus();
      startRun();
    },
    KeyR: () => ui.reply.focus(),
    KeyD: queueDeadline,
    KeyM: () => (ui.queue.querySelector("button") ?? ui.heldHeading).focus(),
  }[event.code];
  if (!action) return;
  event.preventDefault();
  action();
});

// ---- display name -----------------------------------------------------------

// renderName shows the session's name unless the student is editing it.
function renderName(name) {
  if (document.activeElement !== ui.name && ui.name.value !== name) {
    ui.name.value = name;
    countName();
  }
}

// countName says how much of the limit the name uses, counting characters
// as a person does (an emoji with its joiners or skin tone is one), as the
// server does (model.NameLength). The field has no maxlength, which counts
// UTF-16 units and cuts a pasted name silently: a name over the limit is
// refused by the server, with the limit.
const graphemes = typeof Intl.Segmenter === "function" ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;
function countName() {
  const v = ui.name.value.trim();
  const used = graphemes ? [...graphemes.segment(v)].length : [...v].length;
  setText(ui.nameCount, used > NAME_MAX ? `${used} of ${NAME_MAX}: too long, shorten it` : `${used} of ${NAME_MAX}`);
  setData(ui.nameHint, "full", String(used >= NAME_MAX));
}

ui.name.addEventListener("input", countName);

byId("name-form").addEventListener("submit", (event) => {
  event.preventDefault();
  send({ type: "rename", name: ui.name.value }, "Set name");
});

// ---- new session ----------------------------------------------------------------

// "New session" leaves this session for an empty one: asked first, with the
// address that brings this one back. Without script, the link just works.
ui.newSession.addEventListener("click", (event) => {
  if (typeof ui.newSessionDialog.showModal !== "function") return;
  event.preventDefault();
  setText(ui.newSessionAddress, location.origin + location.pathname);
  // A class's session: leaving it leaves the class, which is said first.
  const inClass = ui.classTitle?.hidden === false;
  ui.newSessionClass.hidden = !inClass;
  setText(ui.newSessionClassTitle, inClass ? ui.classTitle.textContent.replace(/^Class: /, "") : "");
  setText(ui.newSessionConfirm, inClass ? "Leave the class and start a new session" : "Start a new session");
  ui.newSessionDialog.showModal();
});
ui.newSessionCancel.addEventListener("click", () => ui.newSessionDialog.close());

// Whatever the browser scrolls into view (a focused control, a skip link's
// target) must not end up under the sticky bar: the scroll padding follows
// the bar's height.
const callbar = byId("callbar");
new ResizeObserver(() => {
  document.documentElement.style.setProperty("scroll-padding-top", `${callbar.offsetHeight + 8}px`);
}).observe(callbar);

// The notices' box scrolls once it holds more than its fifth of the screen;
// only then is it a region a keyboard can reach and scroll.
function markNoticesScrollable() {
  const scrolls = ui.notices.scrollHeight > ui.notices.clientHeight + 1;
  if (scrolls === ui.notices.hasAttribute("tabindex")) return;
  if (scrolls) {
    ui.notices.tabIndex = 0;
    ui.notices.setAttribute("role", "region");
    ui.notices.setAttribute("aria-label", "Notices");
  } else {
    ui.notices.removeAttribute("tabindex");
    ui.notices.removeAttribute("role");
    ui.notices.removeAttribute("aria-label");
  }
}
new ResizeObserver(markNoticesScrollable).observe(ui.notices);
new MutationObserver(() => {
  stackNotices();
  markNoticesScrollable();
}).observe(ui.notices, { childList: true, subtree: true, characterData: true });

// stackNotices marks the newest notice; on a phone the bar shows only it,
// clamped to one line (lab.css), so that two or three notices never push
// the bar past about a third of the screen: "2 more" shows the others
// whole, until the next notice.
const noticesMore = byId("notices-more");
function stackNotices() {
  const shown = [...ui.notices.children].filter((p) => p.textContent !== "");
  const newest = shown.reduce((a, b) => (Number(b.dataset.at ?? 0) > Number(a?.dataset.at ?? 0) ? b : a), shown[0]);
  for (const p of ui.notices.children) p.toggleAttribute("data-newest", p === newest);
  const others = shown.length - 1;
  noticesMore.hidden = others < 1;
  if (others < 1) ui.notices.dataset.open = "false";
  const open = ui.notices.dataset.open === "true";
  noticesMore.setAttribute("aria-expanded", String(open));
  setText(noticesMore, open ? "Show the newest notice only" : `${others} more notice${others === 1 ? "" : "s"}`);
}
noticesMore.addEventListener("click", () => {
  ui.notices.dataset.open = ui.notices.dataset.open === "true" ? "false" : "true";
  stackNotices();
});

// Coming back online is a good moment to retry without waiting out the backoff.
window.addEventListener("online", () => live.retryNow());

setText(ui.sessionId, sessionId);
countName();
if (observing) {
  ui.observer.hidden = false;
  document.title = `Observing · ${document.title}`;
  for (const id of ["start", "main"]) byId(id).inert = true;
}
initExercise();
initPractice(send);
initCode(byId("code"), {
  sessionId,
  send: (frame) => send(frame, "Check"),
  // What the compiler says as the student types: sent only when it can
  // be, and nothing said when not.
  sendLive: (frame) => {
    if (observing || !live.open) return false;
    live.send(JSON.stringify(frame));
    return true;
  },
  play: (frame) => send(frame, "Play this case in the lab"),
});
if (sessionId === "") {
  showConnection("waiting", "Not connected");
  showError("This page needs a session address such as /lab/<id>. Use “New session” to get one.");
} else {
  live.connect();
}
