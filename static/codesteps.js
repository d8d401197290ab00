// The student's failure, step by step (issue 44, docs/code.md "The page"):
// every step of the failing trace can be selected (a button per row; the
// arrow keys, Home and End move between them), and the selected step shows
// the lab's model and the student's module side by side, the values that
// differ marked. The data comes from POST /lab/{id}/code/play with the
// failure's frames, fetched once per failure (a play spends one of the
// address's allowance of checks, so it is not fetched before the student
// asks for a step). The failure's drawing (diagram.js, the SVG of
// /lab/{id}/code/failure.svg, whose groups carry data-step) marks the
// selected step.
//
// From any step the student branches: plays another next frame than the
// trace did (a new run, a deadline, a reply of some kind, a delivery of a
// message held so far); the page plays trace[0..step] + the new frame and
// shows the branch the same way, and from any step of it they branch again.
// A branch that tells the module apart from the model can be kept as the
// student's own case (POST /lab/{id}/code/cases), and the trace shown can
// be played in the lab itself: a new run, then the case's runs and queued
// messages sent on the page's socket, left for the student to deliver.
//
// code.js calls initSteps once and showSteps whenever it has built the
// failure's rows (a new failure, or the same one shown again after a
// check). All text goes through textContent; the drawing's marks are SVG
// nodes made with createElementNS.

import { el, list, num, setText, str } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const FIELDS = ["runId", "callId", "status", "detail"];
const CALL_ID = "lookup";

// The kinds of reply a branch can queue, each made for the run current at
// the step it follows (run, a number).
const REPLY_KINDS = [
  ["current", "a completion for the current run", (run) => reply(`run-${run}`, CALL_ID, "completed", "Answer")],
  ["rejection", "a rejection for the current run", (run) => reply(`run-${run}`, CALL_ID, "rejected", "No answer")],
  ["older", "a reply for an older run", (run) => reply(`run-${Math.max(0, run - 1)}`, CALL_ID, "completed", "Old answer")],
  ["callId", "a completion for another call id", (run) => reply(`run-${run}`, "search", "completed", "Answer")],
  ["malformed", "malformed JSON (cut short)", (run) => `{"runId":"run-${run}","callId":"${CALL_ID}"`],
  ["own", "my own text…", () => ""],
];

function reply(runId, callId, kind, text) {
  return JSON.stringify(kind === "completed" ? { runId, callId, kind, output: text } : { runId, callId, kind, reason: text });
}

const st = {
  sessionId: "",
  play: null, // (frame) => bool: sends a frame on the lab page's socket
  key: "", // the failure shown: its submission and frames
  failure: null,
  trace: [], // the frames shown: the failure's, or a branch's
  steps: null, // the trace played side by side (the API's steps), null until fetched
  branchAt: -1, // a branch: the last step it shares with the failure; -1 for the failure itself
  selected: -1,
  plays: new Map(), // JSON of frames -> steps, for this failure
  busy: false,
  // The parts code.js built: the trace's rows and the step in full.
  tbody: null,
  diff: null,
  svgBox: null,
  // This module's own parts.
  box: null,
  title: null,
  hint: null,
  kind: null,
  textRow: null,
  text: null,
  deliver: null,
  status: null,
  back: null,
  keep: null,
  keepForm: null,
  keepName: null,
  lab: null,
  labSaid: null,
};

// initSteps takes the session and the lab page's send (play(frame) sends a
// frame on the page's socket and returns whether it did).
export function initSteps({ sessionId, play }) {
  st.sessionId = sessionId;
  st.play = play;
}

// showSteps shows failure (the state's code.failure) of submission in the
// rows code.js has just built into tbody, the selected step in diff, and
// marks the step in the drawing in svgBox. The same failure again (after a
// check that found it again) keeps the branch and the step shown.
export function showSteps(failure, { submission, tbody, diff, svgBox }) {
  if (!st.box) {
    build(diff, svgBox);
    const how = el("p", "hint", "Select a step (its button, or the arrow keys, Home and End on the buttons) to see both sides at it, and branch from it below.");
    how.id = "code-steps-how";
    tbody.closest(".code-steps-scroll")?.before(how);
  }
  st.tbody = tbody;
  st.diff = diff;
  if (st.box.previousElementSibling !== diff) diff.after(st.box);
  const frames = list(failure?.frames);
  const key = JSON.stringify([num(submission), frames]);
  if (key !== st.key) {
    st.key = key;
    st.failure = failure;
    st.trace = frames;
    st.steps = null;
    st.branchAt = -1;
    st.selected = Math.min(num(failure?.step), Math.max(0, frames.length - 1));
    st.plays.clear();
    setText(st.status, "");
    setText(st.labSaid, "");
    closeKeep();
  }
  if (st.branchAt < 0 && !st.steps) st.steps = st.plays.get(JSON.stringify(frames)) ?? null;
  render();
}

function build(diff, svgBox) {
  st.svgBox = svgBox;
  // The drawing is fetched again as the failure changes: the mark follows.
  new MutationObserver(markDrawing).observe(svgBox, { childList: true });

  const box = el("div", "code-branch");
  box.id = "code-branch";
  box.dataset.busy = "false";
  box.setAttribute("role", "group");
  box.setAttribute("aria-labelledby", "code-branch-title");
  st.title = el("h4", "", "");
  st.title.id = "code-branch-title";
  st.hint = el("p", "hint", "");
  st.hint.id = "code-branch-hint";

  const moves = el("div", "actions");
  const start = button("code-branch-start", "Start a new run", () => branch({ type: "start" }));
  const deadline = button("code-branch-deadline", "Queue a deadline", () => branch({ type: "queueDeadline" }));
  moves.append(start, deadline);

  const replyRow = el("div", "code-branch-reply");
  const kindLabel = el("label", "", "Reply");
  kindLabel.htmlFor = "code-branch-kind";
  st.kind = el("select");
  st.kind.id = "code-branch-kind";
  for (const [value, words] of REPLY_KINDS) {
    const o = el("option", "", words);
    o.value = value;
    st.kind.append(o);
  }
  st.textRow = el("div", "code-branch-text");
  st.textRow.hidden = true;
  const textLabel = el("label", "", "Your reply's text, queued as it is");
  textLabel.htmlFor = "code-branch-text";
  st.text = el("input");
  st.text.id = "code-branch-text";
  st.text.type = "text";
  st.text.spellcheck = false;
  st.text.setAttribute("autocomplete", "off");
  st.textRow.append(textLabel, st.text);
  const queue = button("code-branch-reply", "Queue a reply…", queueReply);
  st.kind.addEventListener("change", () => {
    st.textRow.hidden = st.kind.value !== "own";
    if (st.kind.value === "own") st.text.value ||= reply(`run-${runAt(st.selected)}`, CALL_ID, "completed", "Mine");
  });
  replyRow.append(kindLabel, st.kind, queue, st.textRow);

  st.deliver = el("div", "actions code-branch-deliver");
  st.deliver.id = "code-branch-deliver";

  st.status = el("p", "code-branch-status");
  st.status.id = "code-branch-status";
  st.status.setAttribute("role", "status");

  const after = el("div", "actions");
  st.back = button("code-branch-back", "Back to the failure", () => {
    st.trace = list(st.failure?.frames);
    st.branchAt = -1;
    st.steps = st.plays.get(JSON.stringify(st.trace)) ?? null;
    st.selected = Math.min(num(st.failure?.step), Math.max(0, st.trace.length - 1));
    closeKeep();
    setText(st.status, "Back to the failure.");
    render();
    focusStep(st.selected);
  });
  st.keep = button("code-branch-keep", "Keep this as my case", openKeep);
  st.lab = button("code-branch-lab", "Play this case in the lab", playInLab);
  after.append(st.back, st.keep, st.lab);

  // Keeping asks for a name first.
  st.keepForm = el("form", "code-branch-keep");
  st.keepForm.id = "code-keep-form";
  st.keepForm.hidden = true;
  const nameLabel = el("label", "", "Name your case");
  nameLabel.htmlFor = "code-keep-name";
  st.keepName = el("input");
  st.keepName.id = "code-keep-name";
  st.keepName.type = "text";
  st.keepName.maxLength = 100;
  st.keepName.setAttribute("autocomplete", "off");
  const yes = el("button", "", "Keep the case");
  yes.type = "submit";
  yes.id = "code-keep-yes";
  const no = button("code-keep-no", "Cancel", () => {
    closeKeep();
    st.keep.focus();
  });
  st.keepForm.append(nameLabel, st.keepName, yes, no);
  st.keepForm.addEventListener("submit", (event) => {
    event.preventDefault();
    keepCase();
  });

  st.labSaid = el("p", "code-branch-lab-said");
  st.labSaid.id = "code-branch-lab-said";
  st.labSaid.setAttribute("role", "status");

  box.append(st.title, st.hint, moves, replyRow, st.deliver, st.status, after, st.keepForm, st.labSaid);
  st.box = box;
}

function button(id, text, onClick) {
  const b = el("button", "", text);
  b.type = "button";
  b.id = id;
  b.addEventListener("click", onClick);
  return b;
}

// ---- the rows and the step shown --------------------------------------------

// firstDiffer is the first step of the trace shown where the two differ,
// -1 when they agree throughout (or, before the play is in, the failure's
// step).
function firstDiffer() {
  if (st.steps) return st.steps.findIndex((s) => s?.differs === true);
  return st.branchAt < 0 ? num(st.failure?.step) : -1;
}

function render() {
  // The rows are made again: a step button that had the focus gives it to
  // its successor.
  const focused = st.tbody.contains(document.activeElement) ? document.activeElement.dataset.step : undefined;
  const differ = firstDiffer();
  const rows = st.trace.map((frame, i) => {
    const tr = el("tr");
    tr.dataset.step = String(i);
    const th = el("th");
    th.scope = "row";
    const b = el("button", "code-step-button", `Step ${i + 1}`);
    b.type = "button";
    b.dataset.step = String(i);
    b.setAttribute("aria-pressed", String(i === st.selected));
    b.addEventListener("click", () => select(i));
    b.addEventListener("keydown", stepKeys);
    th.append(b);
    const what = el("td", "code-frame", frameWords(st.trace, i));
    const result = el("td", "code-same", resultWords(i, differ));
    if (i === differ) {
      tr.classList.add("code-differs");
      result.className = "";
    }
    if (i === st.selected) {
      tr.classList.add("code-selected");
      tr.setAttribute("aria-current", "step");
    }
    tr.append(th, what, result);
    return tr;
  });
  st.tbody.replaceChildren(...rows);
  if (focused !== undefined) focusStep(Math.min(Number(focused), rows.length - 1));
  st.back.hidden = st.branchAt < 0;
  st.keep.hidden = st.branchAt < 0 || !st.steps || differ < 0;
  if (st.keep.hidden) closeKeep();
  renderBranchTools();
  renderSides();
  markDrawing();
}

function resultWords(i, differ) {
  if (st.steps) {
    const s = st.steps[i];
    if (!s) return "Not played";
    return s.differs ? (i === differ ? "Differ: the first difference" : "Differ") : "Same";
  }
  if (differ < 0) return "";
  if (i < differ) return "Same";
  return i === differ ? "Differ: see below" : "Not played";
}

// stepKeys moves between the step buttons with the arrow keys, Home and
// End, selecting as it goes (Tab and Enter work as for any button).
function stepKeys(event) {
  const i = Number(event.currentTarget.dataset.step);
  const last = st.trace.length - 1;
  const to = { ArrowDown: i + 1, ArrowRight: i + 1, ArrowUp: i - 1, ArrowLeft: i - 1, Home: 0, End: last }[event.key];
  if (to === undefined) return;
  event.preventDefault();
  const j = Math.max(0, Math.min(last, to));
  select(j);
  focusStep(j);
}

function focusStep(i) {
  st.tbody.querySelector(`button[data-step="${i}"]`)?.focus();
}

// select shows step i; its sides come from the play, fetched at the first
// step asked for that is not the failure's own (whose sides the state has).
function select(i) {
  st.selected = i;
  closeKeep();
  render();
  if (!st.steps && !(st.branchAt < 0 && i === num(st.failure?.step))) fetchSteps();
}

async function fetchSteps() {
  if (st.busy) return;
  const frames = st.trace;
  const steps = await playTrace(frames, "Playing the trace on the model and on your module…");
  if (steps && frames === st.trace) {
    st.steps = steps;
    render();
  }
}

// playTrace plays frames side by side (once per trace: the answer is kept)
// and resolves to the steps, or null after saying what went wrong.
async function playTrace(frames, doing) {
  const key = JSON.stringify(frames);
  if (st.plays.has(key)) return st.plays.get(key);
  st.busy = true;
  st.box.dataset.busy = "true";
  setText(st.status, doing);
  try {
    const { ok, status, body } = await post(`/lab/${encodeURIComponent(st.sessionId)}/code/play`, { frames });
    if (!ok) {
      setText(st.status, refusal("The trace was not played", status, body));
      return null;
    }
    const steps = list(body?.steps);
    st.plays.set(key, steps);
    setText(st.status, "");
    return steps;
  } finally {
    st.busy = false;
    st.box.dataset.busy = "false";
  }
}

async function post(path, payload) {
  try {
    const resp = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
    });
    let body = null;
    try {
      body = await resp.json();
    } catch {
      // not JSON: the status says enough
    }
    return { ok: resp.ok, status: resp.status, body };
  } catch {
    return { ok: false, status: 0, body: null };
  }
}

// refusal says in words why the lab refused a play or a case.
function refusal(what, status, body) {
  const why = str(body?.error);
  switch (status) {
    case 0:
      return `${what}: the lab could not be reached. Try again in a moment.`;
    case 409:
      return `${what}: check a program first${why ? ` (${why})` : ""}.`;
    case 422:
      return `${what}: your latest program does not load or compile${why ? `: ${why}` : ""}. Fix it and check it again.`;
    case 429:
      return `${what}: too many plays and checks lately. Wait a few seconds and try again.`;
    default:
      return `${what}${why ? `: ${why}` : ` (the lab answered ${status})`}.`;
  }
}

function renderSides() {
  const i = st.selected;
  const words = frameWords(st.trace, i);
  let want;
  let have;
  let differs;
  let property = "";
  if (st.steps?.[i]) {
    const s = st.steps[i];
    want = s.expected ?? {};
    have = s.got ?? {};
    differs = s.differs === true;
    property = str(s.property);
  } else if (st.branchAt < 0 && i === num(st.failure?.step)) {
    want = st.failure?.expected ?? {};
    have = st.failure?.got ?? {};
    differs = true;
    property = str(st.failure?.property);
  }
  const title = el("h4", "", `Step ${i + 1}: ${words}`);
  title.id = "code-diff-title";
  if (!want) {
    const waiting = el("p", "hint", st.busy ? "Playing the trace…" : "This step has not been played yet.");
    st.diff.replaceChildren(title, waiting);
    st.diff.dataset.step = String(i);
    st.diff.dataset.differs = "";
    return;
  }
  const verdict = el(
    "p",
    "code-verdict",
    differs
      ? `They differ here${property ? `: ${property}` : ""} (the differences marked).`
      : "They agree here: your module shows and says what the model does.",
  );
  const model = el("div", "code-side-box");
  model.append(el("h5", "", "The lab's model"));
  fillSide(model, want.call, want.notice, null, have.call, have.notice);
  const mine = el("div", "code-side-box");
  mine.append(el("h5", "", "Your module"));
  fillSide(mine, have.call, have.notice, have.error, want.call, want.notice);
  const pair = el("div", "code-pair");
  pair.append(model, mine);
  const parts = [title, verdict, pair];
  if (!inDrawing(i)) parts.push(el("p", "hint", "The drawing below shows the failure, not this branch, so it marks no step here."));
  st.diff.replaceChildren(...parts);
  st.diff.dataset.step = String(i);
  st.diff.dataset.differs = String(differs);
}

// fillSide writes one side of a step: "Shows" (the view's four fields) and
// "Says" (the notice), marking what differs from the other side.
function fillSide(box, call, notice, error, otherCall, otherNotice) {
  const dl = el("dl", "code-side");
  const shows = el("dd");
  if (call && typeof call === "object" && !Array.isArray(call)) {
    const other = otherCall && typeof otherCall === "object" ? otherCall : {};
    for (const field of FIELDS) {
      const v = field in call ? JSON.stringify(call[field]) : "(missing)";
      const line = el("span", "code-field");
      line.append(document.createTextNode(`${field}: `));
      line.append(JSON.stringify(call[field]) === JSON.stringify(other[field]) ? document.createTextNode(v) : el("mark", "", v));
      shows.append(line);
    }
  } else {
    const v = call === null || call === undefined ? "(no view)" : JSON.stringify(call);
    if (JSON.stringify(call ?? null) === JSON.stringify(otherCall ?? null)) shows.textContent = v;
    else shows.append(el("mark", "", v));
  }
  dl.append(el("dt", "", "Shows"), shows);
  const says = el("dd");
  if (typeof notice === "string") {
    const v = notice === "" ? "(empty)" : notice;
    if (notice === otherNotice) says.textContent = v;
    else says.append(el("mark", "", v));
  } else {
    says.textContent = "(no notice)";
  }
  dl.append(el("dt", "", "Says"), says);
  if (typeof error === "string" && error !== "") {
    const dd = el("dd");
    dd.append(el("mark", "", error));
    dl.append(el("dt", "", "Error"), dd);
  }
  box.append(dl);
}

// ---- the frames in words ------------------------------------------------------

// frameWords says frame i of frames in words, the held messages numbered as
// the lab numbers them (queued replies and deadlines, 1, 2, …).
function frameWords(frames, i) {
  const frame = frames[i];
  switch (frame?.type) {
    case "start":
      return "Start a new run";
    case "queueReply":
      return `Queue message ${queuedBy(frames, i + 1)}, a reply: ${str(frame.raw)}`;
    case "queueDeadline":
      return `Queue message ${queuedBy(frames, i + 1)}, a deadline for the current call`;
    case "deliver":
      return `Deliver message ${num(frame.message)}`;
    default:
      return JSON.stringify(frame);
  }
}

// queuedBy is how many messages frames[0..n) queue.
function queuedBy(frames, n) {
  return frames.slice(0, n).filter((f) => f?.type === "queueReply" || f?.type === "queueDeadline").length;
}

// runAt is the run current after step i (1 + the runs started so far).
function runAt(i) {
  return 1 + st.trace.slice(0, i + 1).filter((f) => f?.type === "start").length;
}

// ---- branching ------------------------------------------------------------------

function renderBranchTools() {
  const i = st.selected;
  setText(st.title, `Branch after step ${i + 1}`);
  setText(
    st.hint,
    `Play something else after step ${i + 1} than the ${st.branchAt < 0 ? "failure" : "branch"} did: both sides replay ${i === 0 ? "step 1" : `steps 1 to ${i + 1}`}, then your frame, and the steps above show what each does. After step ${i + 1} the current run is run-${runAt(i)}.`,
  );
  const held = queuedBy(st.trace, i + 1);
  const buttons = [];
  for (let n = 1; n <= held; n++) {
    const b = el("button", "", `Deliver message ${n}`);
    b.type = "button";
    b.dataset.message = String(n);
    b.addEventListener("click", () => branch({ type: "deliver", message: n }));
    buttons.push(b);
  }
  if (buttons.length === 0) buttons.push(el("span", "hint", "No message is held yet at this step."));
  const same = buttons.length === st.deliver.children.length && buttons.every((b, k) => b.textContent === st.deliver.children[k].textContent);
  if (!same) st.deliver.replaceChildren(...buttons);
}

function queueReply() {
  const kind = REPLY_KINDS.find(([value]) => value === st.kind.value) ?? REPLY_KINDS[0];
  const raw = kind[0] === "own" ? st.text.value : kind[2](runAt(st.selected));
  branch({ type: "queueReply", raw });
}

// branch plays the trace up to the selected step, then frame, and shows it.
async function branch(frame) {
  if (st.busy) {
    setText(st.status, "Still playing the last branch: wait for it.");
    return;
  }
  const at = st.selected;
  const frames = [...st.trace.slice(0, at + 1), frame];
  const steps = await playTrace(frames, `Playing your branch after step ${at + 1}…`);
  if (!steps) return;
  // The branch shares with the failure the steps the two traces agree on.
  const failure = list(st.failure?.frames);
  let shared = -1;
  while (shared + 1 < Math.min(frames.length, failure.length) && JSON.stringify(frames[shared + 1]) === JSON.stringify(failure[shared + 1])) shared++;
  st.trace = frames;
  st.steps = steps;
  st.branchAt = shared === failure.length - 1 && frames.length === failure.length ? -1 : shared;
  st.selected = Math.min(frames.length, steps.length) - 1;
  render();
  const differ = firstDiffer();
  const last = st.steps[st.selected];
  let said = `Your branch, ${frames.length} steps: at step ${st.selected + 1} (${frameWords(frames, st.selected).toLowerCase()}) they ${last?.differs ? "differ" : "agree"}.`;
  if (differ >= 0) said += ` They first differ at step ${differ + 1}${str(st.steps[differ]?.property) ? `: ${str(st.steps[differ].property)}` : ""}.`;
  else said += " They agree at every step so far.";
  if (steps.length < frames.length) said += " Your module raised an error, so the steps end there.";
  setText(st.status, said);
  focusStep(st.selected);
}

// ---- keeping a branch ----------------------------------------------------------

function openKeep() {
  const differ = firstDiffer();
  st.keepName.value = str(st.steps?.[differ]?.property) || `my branch after step ${st.branchAt + 1}`;
  st.keepForm.hidden = false;
  st.keepName.focus();
  st.keepName.select();
}

function closeKeep() {
  if (st.keepForm) st.keepForm.hidden = true;
}

async function keepCase() {
  const name = st.keepName.value.trim();
  if (name === "") {
    setText(st.status, "Give your case a name.");
    st.keepName.focus();
    return;
  }
  const frames = st.trace;
  setText(st.status, "Keeping your case…");
  const { ok, status, body } = await post(`/lab/${encodeURIComponent(st.sessionId)}/code/cases`, { name, frames });
  if (!ok) {
    setText(st.status, refusal("The case was not kept", status, body));
    return;
  }
  closeKeep();
  setText(st.status, `Kept as your case “${str(body?.case) || name}”: your program is checked on it now and with every later check (see “Cases added to your check”).`);
  st.keep.focus();
}

// ---- playing a case in the lab ---------------------------------------------------

// playInLab loads the trace shown into the student's own lab: a new run,
// then the trace's runs and queued messages in order, sent on the page's
// socket; the deliveries are left to the student, who can hold and reorder
// them.
function playInLab() {
  const frames = st.trace;
  const before = labMessages();
  if (!st.play?.({ type: "start" })) {
    setText(st.labSaid, "Not played in the lab: the page is not connected (or only observing). Try again when it says Connected.");
    return;
  }
  let queued = 0;
  let runs = 0;
  for (const f of frames) {
    let ok = true;
    if (f?.type === "start") {
      ok = st.play({ type: "start" });
      runs++;
    } else if (f?.type === "queueReply") {
      ok = st.play({ type: "queueReply", raw: str(f.raw) });
      queued++;
    } else if (f?.type === "queueDeadline") {
      ok = st.play({ type: "queueDeadline" });
      queued++;
    }
    if (!ok) {
      setText(st.labSaid, "Not all of the case reached the lab: the connection dropped. Try again when it says Connected.");
      return;
    }
  }
  const order = frames.filter((f) => f?.type === "deliver").map((f) => String(before + num(f.message)));
  const names = queued === 1 ? `message ${before + 1}` : `messages ${before + 1} to ${before + queued}`;
  let said = `Played in the lab: a new run${runs > 0 ? ` and the case's ${runs} other run${runs === 1 ? "" : "s"}` : ""}, with the case's ${queued === 1 ? "message" : `${queued} messages`} held as ${names}, nothing delivered.`;
  if (order.length > 0) said += ` The case delivered ${order.length === 1 ? `message ${order[0]}` : `messages ${order.join(", then ")}`}: deliver them yourself under Held messages, in that order or another.`;
  if (frames.some((f) => f?.type === "queueReply")) said += " The replies name the runs they named in the case.";
  setText(st.labSaid, said);
  const held = document.getElementById("held-heading");
  if (held) {
    held.scrollIntoView({ block: "start" });
    held.focus({ preventScroll: true });
  }
}

// labMessages is the highest number of the student's own held messages on
// the lab page (its Deliver buttons say "Deliver message N"): the case's
// messages follow it.
function labMessages() {
  let most = 0;
  for (const b of document.querySelectorAll("#queue button[data-message-id], #delivered button[data-message-id]")) {
    const m = /^Deliver message (\d+)$/.exec(b.textContent ?? "");
    if (m) most = Math.max(most, Number(m[1]));
  }
  return most;
}

// ---- the drawing ---------------------------------------------------------------

// inDrawing says whether step i of the trace shown is a step of the
// failure's drawing (the failure itself, or a branch before it departs).
function inDrawing(i) {
  return st.branchAt < 0 || i <= st.branchAt;
}

// markDrawing marks the selected step's groups in the drawing (data-step,
// internal/diagramsvg): a class, and a box behind each, made as SVG nodes.
function markDrawing() {
  const svg = st.svgBox?.querySelector("svg");
  if (!svg) return;
  for (const old of svg.querySelectorAll(".code-step-box")) old.remove();
  for (const g of svg.querySelectorAll(".code-step-selected")) g.classList.remove("code-step-selected");
  const i = st.selected;
  if (i < 0 || !inDrawing(i) || !st.failure) return;
  for (const g of svg.querySelectorAll(`g[data-step="${i}"]`)) {
    g.classList.add("code-step-selected");
    let box;
    try {
      box = g.getBBox();
    } catch {
      continue; // not laid out (the panel closed): the class is enough
    }
    if (box.width === 0 && box.height === 0) continue;
    const r = document.createElementNS(SVG_NS, "rect");
    r.setAttribute("class", "code-step-box");
    r.setAttribute("x", String(box.x - 6));
    r.setAttribute("y", String(box.y - 6));
    r.setAttribute("width", String(box.width + 12));
    r.setAttribute("height", String(box.height + 12));
    r.setAttribute("rx", "4");
    g.insertBefore(r, g.querySelector(":scope > title")?.nextSibling ?? g.firstChild);
  }
}
