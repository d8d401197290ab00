// The console's case tools (issue 44, docs/instructor.md "The console's
// case tools"): nobody types frames in front of a class.
//
// - "Use as a code case" on the session shown: what its student (or the
//   teacher, in a practice session of their own) clicked through becomes a
//   case, from the run chosen on (POST /api/code/cases with fromSession).
// - "Keep as a case" on the session shown when its program fails: the
//   failure's shrunk trace becomes a case of the class (fromFailure).
// - "Code cases": the cases the console's sessions hold (GET
//   /api/code/cases?class=… or ?all=true), each in words with who added it,
//   when, and how many pass it, and "Remove" (asked first; DELETE).
//
// Who passes a case just added is drawn by codeboard.js, as for its own
// form. instructor.js calls initCasesBoard once, casesWatched with each
// state of the watched session and casesOverview with each overview frame.
// All text goes through textContent.

import { APIError, KeyedList, api, byId, el, list, localTime, num, setText, str } from "./dom.js";
import { showCaseResults } from "./codeboard.js";

// The list is fetched at most this often (the overview changes many times
// a second in a busy class), and again this long after a fetch while some
// session is still being checked.
const REFRESH_MS = 2000;
// A session with no program never checks a case: the list stops asking
// after this many fetches in a row that still find one being checked.
const MAX_POLLS = 15;

const board = {
  scope: "", // the class of a class console, "" on the open lab's
  targets: null, // (value) => {body} or {error}: the inject form's targets
  watching: "", // the session shown
  runs: 0, // its runs so far
  failure: null, // its failure, when its program fails
  property: "",
  rowsKey: "", // the overview's code cells, to tell when they change
  last: 0, // Date.now() of the last fetch
  timer: 0,
  inFlight: false,
  again: false,
  polls: 0, // fetches in a row while some session is still being checked
  removing: "", // the case the dialog asks about
  rows: null, // KeyedList of the cases
};

const ui = {};

// initCasesBoard wires the tools: targets(value) turns an "Into" choice into
// the request's targets exactly as the inject form does; scope is the class
// of a class console ("" on the open lab's).
export function initCasesBoard({ targets, scope }) {
  for (const id of [
    "use-case-box", "use-target", "use-name", "use-run", "use-case", "use-summary", "use-results",
    "keep-box", "keep-text", "keep-open", "keep-form", "keep-name", "keep-into", "keep-cancel", "keep-summary", "keep-results",
    "case-list", "case-list-empty", "case-list-status", "case-remove-dialog", "case-remove-text", "case-remove-yes", "case-remove-no",
  ]) {
    ui[id.replace(/-(\w)/g, (_, c) => c.toUpperCase())] = byId(id);
  }
  if (!ui.caseList) return;
  board.scope = scope;
  board.targets = targets;
  board.rows = new KeyedList(ui.caseList, { make: makeCase, update: updateCase });
  setText(ui.keepInto, scope ? "It joins the suite of every session in this class." : "It joins the suite of every session in the open lab.");
  if (!scope) addClassTargets();
  ui.useCase.addEventListener("click", useSession);
  ui.keepOpen.addEventListener("click", openKeep);
  ui.keepCancel.addEventListener("click", () => {
    ui.keepForm.hidden = true;
    ui.keepOpen.focus();
  });
  ui.keepForm.addEventListener("submit", (event) => {
    event.preventDefault();
    keepFailure();
  });
  ui.caseRemoveNo.addEventListener("click", () => {
    ui.caseRemoveDialog.close();
    setText(ui.caseListStatus, `Kept “${board.removing}”.`);
  });
  ui.caseRemoveYes.addEventListener("click", () => {
    ui.caseRemoveDialog.close();
    removeCase(board.removing);
  });
  // The typed-frames form (codeboard.js) added a case: the list shows it.
  const typed = byId("case-summary");
  if (typed) new MutationObserver(() => refreshSoon()).observe(typed, { childList: true, characterData: true, subtree: true });
  refreshSoon();
}

// addClassTargets offers each class as a target on the open lab's console,
// where the teacher's own practice session is listed: a demonstration made
// there becomes a case of a class.
async function addClassTargets() {
  let out;
  try {
    out = await api("GET", "/api/classes");
  } catch {
    return; // a class key's login, or no classes: the lab's own targets stay
  }
  const classes = list(out?.classes).filter((c) => str(c?.id) !== "");
  if (classes.length === 0) return;
  const group = el("optgroup");
  group.label = "A class";
  for (const c of classes) {
    const o = el("option", "", `The class ${str(c.title) || str(c.id)}`);
    o.value = `class:${str(c.id)}`;
    group.append(o);
  }
  ui.useTarget.append(group);
}

// targetOf is the request's targets for an "Into" choice.
function targetOf(value) {
  if (value.startsWith("class:")) return { body: { class: value.slice("class:".length) } };
  return board.targets(value);
}

// ---- the session shown ----------------------------------------------------------

// casesWatched takes each state frame of the watched session: its runs for
// "from run", and its failure for "Keep as a case".
export function casesWatched(s) {
  if (!ui.caseList) return;
  const id = str(s?.session);
  if (id !== board.watching) {
    board.watching = id;
    ui.keepForm.hidden = true;
    setText(ui.useSummary, "");
    setText(ui.keepSummary, "");
  }
  ui.useCaseBox.hidden = id === "";
  const m = /^run-(\d+)$/.exec(str(s?.call?.runId));
  const runs = m ? Number(m[1]) : 1;
  if (runs !== board.runs) {
    board.runs = runs;
    const chosen = ui.useRun.value;
    const options = [];
    for (let k = 1; k <= runs; k++) {
      const o = el("option", "", k === 1 ? "run-1: all of it" : `run-${k} on`);
      o.value = `run-${k}`;
      options.push(o);
    }
    ui.useRun.replaceChildren(...options);
    ui.useRun.value = options.some((o) => o.value === chosen) ? chosen : "run-1";
  }
  const code = s?.code && typeof s.code === "object" ? s.code : null;
  const failure = code && (code.status === "failed" || code.status === "error") && code.failure && typeof code.failure === "object" ? code.failure : null;
  board.failure = failure;
  board.property = str(failure?.property) || str(code?.property);
  ui.keepBox.hidden = failure === null;
  if (failure) {
    const who = byId("watched-name")?.textContent || "This student";
    setText(ui.keepText, `${who}'s program fails${board.property ? `: ${board.property}` : ""} (${str(failure.case)}, ${list(failure.frames).length} frames). Keep that failure as a case, so that every later program of the class must pass it.`);
  } else {
    ui.keepForm.hidden = true;
  }
}

async function useSession() {
  const name = ui.useName.value.trim();
  if (!board.watching) {
    setText(ui.useSummary, "Choose a session in the table first.");
    return;
  }
  if (name === "") {
    setText(ui.useSummary, "Give the case a name.");
    ui.useName.focus();
    return;
  }
  const { body, error } = targetOf(ui.useTarget.value);
  if (error) {
    setText(ui.useSummary, error);
    return;
  }
  const req = { ...body, name, fromSession: board.watching };
  if (ui.useRun.value && ui.useRun.value !== "run-1") req.fromRun = ui.useRun.value;
  await addCase(req, ui.useSummary, ui.useResults);
}

function openKeep() {
  ui.keepName.value = board.property || "a student's failure";
  ui.keepForm.hidden = false;
  ui.keepName.focus();
  ui.keepName.select();
}

async function keepFailure() {
  const name = ui.keepName.value.trim();
  if (name === "") {
    setText(ui.keepSummary, "Give the case a name.");
    ui.keepName.focus();
    return;
  }
  const { body, error } = board.scope ? { body: { class: board.scope } } : board.targets("all");
  if (error) {
    setText(ui.keepSummary, error);
    return;
  }
  if (await addCase({ ...body, name, fromFailure: board.watching }, ui.keepSummary, ui.keepResults)) ui.keepForm.hidden = true;
}

// addCase sends a case and says how it went in summary, and who passes it
// in results (codeboard.js); true when some session took it.
async function addCase(req, summary, results) {
  setText(summary, "Adding the case…");
  results.replaceChildren();
  let out;
  try {
    out = await api("POST", "/api/code/cases", req);
  } catch (e) {
    if (!(e instanceof APIError)) throw e;
    if (e.status === 401) return false; // the console has stopped (loggedOut)
    out = e.body;
    if (e.status === 0) {
      setText(summary, "The case did not reach the server.");
      return false;
    }
    if (e.unreadable || list(out?.results).length === 0) {
      setText(summary, e.error || `The server refused the case (${e.status}).`);
      return false;
    }
  }
  const rs = list(out?.results);
  const applied = rs.filter((r) => r?.applied).length;
  setText(summary, `Case “${req.name}” added in ${applied} of ${rs.length} session${rs.length === 1 ? "" : "s"}; their latest programs are checked again.`);
  showCaseResults(results, req.name, rs);
  refreshSoon(0);
  return applied > 0;
}

// ---- the list of cases ------------------------------------------------------------

// casesOverview takes each overview frame: when a program's result
// changes, so may who passes a case.
export function casesOverview(frame) {
  if (!ui.caseList) return;
  const key = JSON.stringify(list(frame?.sessions).map((r) => [str(r?.id), r?.code?.status, r?.code?.cases, r?.code?.passed, r?.code?.submissions]));
  if (key === board.rowsKey) return;
  board.rowsKey = key;
  refreshSoon();
}

// refreshSoon fetches the list again, at most once every REFRESH_MS (or
// after wait), one request at a time.
function refreshSoon(wait) {
  if (board.inFlight) {
    board.again = true;
    return;
  }
  board.polls = 0;
  if (board.timer) {
    if (wait !== 0) return;
    clearTimeout(board.timer);
  }
  const left = wait ?? Math.max(0, board.last + REFRESH_MS - Date.now());
  board.timer = setTimeout(() => {
    board.timer = 0;
    refresh();
  }, left);
}

async function refresh() {
  board.inFlight = true;
  board.last = Date.now();
  const q = board.scope ? `class=${encodeURIComponent(board.scope)}` : "all=true";
  let checking = false;
  try {
    const out = await api("GET", `/api/code/cases?${q}`);
    const items = list(out?.cases);
    board.rows.render(items, (c) => (str(c?.name) === "" ? undefined : str(c.name)));
    ui.caseListEmpty.hidden = items.length > 0;
    checking = items.some((c) => num(c?.checked) < num(c?.sessions));
  } catch (e) {
    if (!(e instanceof APIError) || e.status === 401) return;
    setText(ui.caseListStatus, `The cases could not be read: ${e.message}`);
  } finally {
    board.inFlight = false;
    const poll = checking && board.polls < MAX_POLLS;
    if (board.again || poll) {
      board.again = false;
      const polls = board.polls + 1;
      refreshSoon();
      board.polls = poll ? polls : 0;
    }
  }
}

function makeCase(name) {
  const li = el("li", "case-item");
  li.dataset.case = name;
  const h = el("h3", "", name);
  const passes = el("p", "case-passes");
  const meta = el("p", "meta");
  const words = el("ol", "case-words");
  const remove = el("button", "", "Remove");
  remove.type = "button";
  remove.className = "case-remove";
  remove.setAttribute("aria-label", `Remove ${name}`);
  remove.addEventListener("click", () => {
    board.removing = name;
    setText(ui.caseRemoveText, `“${name}” leaves the suite of every session that has it, and their latest programs are checked again. A case removed can be added again later.`);
    ui.caseRemoveDialog.showModal();
  });
  li.append(h, passes, meta, words, remove);
  return { el: li, passes, meta, words, key: "" };
}

function updateCase(row, c) {
  const sessions = num(c.sessions);
  const checked = num(c.checked);
  const passing = num(c.passing);
  let text = `passes ${passing} of ${sessions}`;
  if (checked < sessions) text += `; being checked (${checked} of ${sessions} checked)`;
  setText(row.passes, text);
  row.el.dataset.passing = String(passing);
  row.el.dataset.checked = String(checked);
  const when = localTime(c.added);
  setText(row.meta, `Added by the ${str(c.by) || "instructor"}${when ? ` at ${when}` : ""}; ${list(c.words).length} frames.`);
  const key = JSON.stringify(list(c.words));
  if (key !== row.key) {
    row.key = key;
    row.words.replaceChildren(...list(c.words).map((w) => el("li", "", str(w))));
  }
}

async function removeCase(name) {
  const q = board.scope ? `class=${encodeURIComponent(board.scope)}` : "all=true";
  setText(ui.caseListStatus, `Removing “${name}”…`);
  try {
    const out = await api("DELETE", `/api/code/cases/${encodeURIComponent(name)}?${q}`);
    setText(ui.caseListStatus, `Removed “${name}” from ${num(out?.applied)} session${num(out?.applied) === 1 ? "" : "s"}; their latest programs are checked again.`);
  } catch (e) {
    if (!(e instanceof APIError) || e.status === 401) return;
    setText(ui.caseListStatus, e.error || `The server refused the removal (${e.status}).`);
  }
  refreshSoon(0);
  ui.caseList.closest("section")?.querySelector("h2")?.focus?.();
}
