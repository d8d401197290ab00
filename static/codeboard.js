// The console's side of "Write the client" (issue 33, docs/code.md "The
// page"): per student on the progress board, the programs checked, the
// cases passed, the status and the first failure in words; above the board
// the class's summary grouped by that failure ("2 of 5 programs accept a
// reply for an older run"); and the form that adds an instructor's own case
// (POST /api/code/cases) with who passes it.
//
// Drawn from the overview rows' "code" ({submissions, status, cases,
// passed, property, language, warnings, tasks}), so it is as live as the
// class table. A build the ReScript compiler refused says so with its
// warnings ("does not compile (warning 8)"), the summary counts those by
// warning, and a column says which of the lesson's two compiler tasks the
// student did. progress.js
// calls codeSummaryBox, codeHeaders, codeCells and drawCodeSummary;
// instructor.js calls initCodeCases. All text goes through textContent.

import { APIError, api, byId, el, list, num, setData, setText, str } from "./dom.js";

export const codeHeaders = ["Code checks", "Cases passed", "Code status", "First failure", "Compiler tasks"];

const summary = { lead: null, compile: null, groups: null, box: null };

// codeSummaryBox returns the element the class's summary is drawn into.
export function codeSummaryBox() {
  const box = el("div", "code-class");
  box.id = "code-class";
  const h = el("h3", "", "Write the client");
  h.id = "code-class-heading";
  summary.lead = el("p", "");
  summary.lead.id = "code-class-lead";
  summary.compile = el("p", "");
  summary.compile.id = "code-class-compile";
  summary.compile.hidden = true;
  summary.groups = el("ul", "code-groups");
  summary.groups.id = "code-groups";
  summary.groups.setAttribute("aria-labelledby", h.id);
  box.append(h, summary.lead, summary.compile, summary.groups);
  summary.box = box;
  return box;
}

// codeCells returns a row's code cells ({tds, update(row)}).
export function codeCells() {
  const subs = el("td", "code-subs");
  const passed = el("td", "code-passed");
  const status = el("td", "code-status");
  const property = el("td", "code-property");
  const tasks = el("td", "code-tasks");
  return {
    tds: [subs, passed, status, property, tasks],
    update(row) {
      const c = codeOf(row);
      setText(subs, c ? String(num(c.submissions)) : "none");
      setText(passed, c && num(c.cases) > 0 ? `${num(c.passed)} of ${num(c.cases)}` : "");
      setText(status, c ? statusWords(c) : "");
      setData(status, "status", c ? str(c.status) : "");
      setData(status, "language", c ? str(c.language) : "");
      setText(property, c && c.status !== "passed" && !refused(c) ? str(c.property) || (c.status === "error" ? "does not load" : "") : "");
      setText(tasks, c ? tasksWords(c.tasks) : "");
    },
  };
}

const codeOf = (row) => (row?.code && typeof row.code === "object" ? row.code : null);

// refused says whether a row's program is a build the compiler refused
// (the row's code has warnings, [] for plain errors, only then).
const refused = (c) => c?.status === "error" && Array.isArray(c.warnings);
const warningsOf = (c) => list(c.warnings).filter((w) => typeof w === "number");

// statusWords says a program's status: a refused build "does not compile",
// with the warnings that stopped it ("does not compile (warnings 8, 11)").
function statusWords(c) {
  if (!refused(c)) return str(c.status);
  const w = warningsOf(c);
  if (w.length === 0) return "does not compile";
  return `does not compile (warning${w.length === 1 ? "" : "s"} ${w.join(", ")})`;
}

// tasksWords says which of the lesson's two compiler tasks a student did.
function tasksWords(tasks) {
  const missing = tasks?.missingRejected === true;
  const cancelled = tasks?.addCancelled === true;
  if (missing && cancelled) return "both";
  if (missing) return "missing Rejected";
  if (cancelled) return "Cancelled";
  return "none";
}

// warningWords names what a warning that stopped a build says.
const warningWords = (w) => (w === 8 ? "forgot a case (warning 8)" : `warning ${w}`);

// compileLine counts the refused builds by the warning that stopped them,
// most first: "4 of 10 programs do not compile: 3 forgot a case (warning
// 8), 1 other errors"; "" when none is refused.
function compileLine(withCode) {
  const bad = withCode.filter(refused);
  if (bad.length === 0) return "";
  const counts = new Map();
  for (const c of bad) {
    const w = warningsOf(c);
    for (const key of w.length > 0 ? w.map(warningWords) : ["other errors"]) counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const parts = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([what, k]) => `${k} ${what}`);
  const n = withCode.length;
  const verb = bad.length === 1 ? "does not compile" : "do not compile";
  return `${bad.length} of ${n} program${n === 1 ? "" : "s"} ${verb}: ${parts.join(", ")}`;
}

// verb says property of k programs: as it is of one ("1 of 5 programs
// accepts a reply for an older run"), its verb plural for more ("2 of 5
// programs accept …"); one that names its own subject ("a deadline
// overwrites a result") follows a colon.
function verb(property, k) {
  const [first, ...rest] = property.split(" ");
  if (["a", "an", "the", "notice"].includes(first) || !first.endsWith("s")) return `: ${property}`;
  if (k === 1) return ` ${property}`;
  return ` ${[first === "does" ? "do" : first.slice(0, -1), ...rest].join(" ")}`;
}

// drawCodeSummary draws the class's summary from the overview rows, and
// brings the results of the last case added up to date.
// situationsLine says which of the lesson's situations the class's
// programs get wrong, most first (the rows' code.wrong, issue 43).
function situationsLine(withCode) {
  const counts = new Map();
  for (const c of withCode) for (const w of list(c.wrong)) counts.set(str(w), (counts.get(str(w)) ?? 0) + 1);
  if (counts.size === 0) return "";
  const parts = [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([w, k]) => `${w} (${k} of ${withCode.length})`);
  return `Situations the class gets wrong: ${parts.join(", ")}`;
}

export function drawCodeSummary(rows) {
  if (!summary.box) return;
  const withCode = rows.map(codeOf).filter(Boolean);
  const n = withCode.length;
  const passing = withCode.filter((c) => c.status === "passed").length;
  const checking = withCode.filter((c) => c.status === "checking").length;
  let lead = `${n} of ${rows.length} student${rows.length === 1 ? " has" : "s have"} checked a program`;
  if (n > 0) lead += `; ${passing} of ${n} pass every case`;
  if (checking > 0) lead += `; ${checking} being checked`;
  setText(summary.lead, `${lead}.`);
  const compile = compileLine(withCode);
  const wrong = situationsLine(withCode);
  const line = [compile, wrong].filter(Boolean).join(". ");
  setText(summary.compile, line ? `${line}.` : "");
  summary.compile.hidden = line === "";
  const groups = new Map();
  for (const c of withCode) {
    if (c.status === "passed" || c.status === "checking" || refused(c)) continue;
    const p = str(c.property) || (c.status === "error" ? "does not load" : "fails");
    groups.set(p, (groups.get(p) ?? 0) + 1);
  }
  const items = [...groups].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const lines = items.map(([p, k]) => {
    const li = el("li", "", `${k} of ${n} program${n === 1 ? "" : "s"}${verb(p, k)}`);
    li.dataset.property = p;
    return li;
  });
  const same = lines.length === summary.groups.children.length && lines.every((li, i) => li.textContent === summary.groups.children[i].textContent);
  if (!same) summary.groups.replaceChildren(...lines);
  cases.rows = new Map(rows.map((r) => [str(r.id), r]));
  drawCaseResults();
}

// ---- the instructor's own case ------------------------------------------------

const cases = {
  ui: null,
  targets: null, // (target) => {body} or {error}: the inject form's targets
  label: null, // (id) => a session's name
  rows: new Map(),
  last: null, // { name, results, before } of the case last added
  watched: new Map(), // session id -> the "own" of its last state frame (the watched session's)
};

// codeWatched takes a state frame of the watched session: its code's "own"
// says exactly whether it passes the instructor's cases.
export function codeWatched(frame) {
  const own = frame?.code?.own;
  if (Array.isArray(own)) cases.watched.set(str(frame.session), own);
  drawCaseResults();
}

// initCodeCases wires the form in #code-cases. targets(value) turns the
// form's "Into" into the request's targets exactly as the inject form does;
// label(id) names a session.
export function initCodeCases({ targets, label }) {
  const ui = {
    target: byId("case-target"),
    name: byId("case-name"),
    frames: byId("case-frames"),
    framesCheck: byId("case-frames-check"),
    add: byId("add-case"),
    summary: byId("case-summary"),
    results: byId("case-results"),
  };
  if (!ui.add) return;
  cases.ui = ui;
  cases.targets = targets;
  cases.label = label;
  ui.frames.addEventListener("input", () => framesOf(ui.frames.value));
  ui.add.addEventListener("click", addCase);
  framesOf(ui.frames.value);
}

// framesOf parses the frames' text and says what is wrong with it, or
// returns the list.
function framesOf(text) {
  const ui = cases.ui;
  let frames;
  try {
    frames = JSON.parse(text);
  } catch (e) {
    setText(ui.framesCheck, `Not JSON: ${String(e?.message ?? e)}`);
    ui.frames.setAttribute("aria-invalid", "true");
    return null;
  }
  const bad = !Array.isArray(frames) || frames.length === 0 || frames.some((f) => typeof f?.type !== "string");
  if (bad) {
    setText(ui.framesCheck, "Give a list of frames, each an object with a type: start, queueReply, queueDeadline or deliver.");
    ui.frames.setAttribute("aria-invalid", "true");
    return null;
  }
  setText(ui.framesCheck, `${frames.length} frame${frames.length === 1 ? "" : "s"}.`);
  ui.frames.removeAttribute("aria-invalid");
  return frames;
}

async function addCase() {
  const ui = cases.ui;
  const name = ui.name.value.trim();
  const frames = framesOf(ui.frames.value);
  ui.results.replaceChildren();
  cases.last = null;
  if (name === "") {
    setText(ui.summary, "Give the case a name.");
    ui.name.focus();
    return;
  }
  if (!frames) {
    setText(ui.summary, "The frames are not a list of client frames.");
    ui.frames.focus();
    return;
  }
  const { body, error } = cases.targets(ui.target.value);
  if (error) {
    setText(ui.summary, error);
    return;
  }
  setText(ui.summary, "Adding the case…");
  let out;
  try {
    out = await api("POST", "/api/code/cases", { ...body, name, frames });
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    if (e.status === 401) return; // the console has stopped (loggedOut)
    out = e.body;
    if (e.status === 0) {
      setText(ui.summary, "The case did not reach the server.");
      return;
    }
    if (e.unreadable || list(out?.results).length === 0) {
      setText(ui.summary, e.error || `The server refused the case (${e.status}).`);
      return;
    }
  }
  const results = list(out?.results);
  const applied = results.filter((r) => r?.applied).length;
  setText(ui.summary, `Case “${name}” added in ${applied} of ${results.length} sessions; their latest programs are checked again.`);
  // The cases each program was checked on before: once a row's count has
  // grown, the re-check with this case is in.
  const before = new Map(results.map((r) => [str(r?.session), num(codeOf(cases.rows.get(str(r?.session)))?.cases)]));
  cases.last = { name, results, before };
  drawCaseResults();
}

// passesOf says whether a session's program passes the case named name:
// exactly from the case's outcome ("own") in the overview row or the
// watched session's state when there is one; else a program re-checked
// with the case that passes every case passes it, and one that fails
// fails some case (which, the session's own page or a watch says).
function passesOf(r, last) {
  const name = last.name;
  const id = str(r.session);
  const code = codeOf(cases.rows.get(id));
  const own = [...list(code?.own), ...list(cases.watched.get(id))].find((c) => str(c?.case) === name);
  if (own) return own.passed === true ? "passes" : "fails";
  if (typeof r.passed === "boolean") return r.passed ? "passes" : "fails";
  if (!cases.rows.has(id) && !cases.watched.has(id)) return "added (not in this console's table: the list of code cases says who passes)";
  if (!code) return "no program checked yet";
  const rechecked = num(code.cases) > (last.before.get(id) ?? 0) && code.status !== "checking";
  if (!rechecked) return "being checked";
  return code.status === "passed" ? "passes" : "fails at least one case; watch the session to see whether this one";
}

function drawCaseResults() {
  if (cases.last && cases.ui) drawResults(cases.last, cases.ui.results);
  for (const [ul, last] of elsewhere) drawResults(last, ul);
}

// drawResults says in ul, per session, whether its program passes the case
// last added (last: { name, results, before }).
function drawResults(last, ul) {
  const lines = last.results.map((r) => {
    const li = el("li");
    const who = cases.label(str(r.session));
    li.dataset.session = str(r.session);
    if (!r?.applied) {
      li.className = "refused";
      li.textContent = `${who}: not added: ${str(r?.error)}`;
      return li;
    }
    const words = passesOf(r, last);
    li.dataset.passes = words === "passes" ? "true" : words === "fails" ? "false" : "";
    li.textContent = `${who}: ${words}`;
    return li;
  });
  const same = lines.length === ul.children.length && lines.every((li, i) => li.textContent === ul.children[i].textContent);
  if (!same) ul.replaceChildren(...lines);
}

// ---- the results of a case added by another form (casesboard.js) -------------

const elsewhere = new Map(); // ul -> { name, results, before }

// showCaseResults draws into ul, as this form draws its own, who passes
// the case name that POST /api/code/cases answered results for, and keeps
// it up to date from the overview rows and the watched session.
export function showCaseResults(ul, name, results) {
  const rs = list(results);
  const before = new Map(rs.map((r) => [str(r?.session), num(codeOf(cases.rows.get(str(r?.session)))?.cases)]));
  elsewhere.set(ul, { name, results: rs, before });
  drawCaseResults();
}
