// The student page's "Write the client" panel (issues 33 and 41, docs/code.md
// "The page"): the student writes the lesson's ToolCall module (begin,
// receive, expire, view) in ReScript or JavaScript in a code editor, Check
// sends it to the lab ({"type":"submitCode","language":…} over the page's
// one socket), and the state frame's "code" says how it did: the compiler's
// errors and warnings marked in the editor and listed, the cases passed, the
// seed, an error with its line marked, and the first failure step by step
// with the failing step highlighted, drawn by the server (GET
// /lab/{id}/code/failure.svg, shown as the session diagram is, diagram.js).
// The languages the lab offers come from GET /code.json (JavaScript alone
// when it answers nothing); each language keeps its own draft.
//
// The editor is CodeMirror 5, vendored under vendor/ (no build step); its
// 400 KB are loaded only when the panel is first opened, so the free lab
// stays as light as it was. Until then (or if it cannot load) a plain
// textarea holds the code. The drafts live in localStorage per session, so a
// reload keeps them. All text goes through textContent.
//
// lab.js calls initCode once, renderCode with every state and codeRefused
// with every error frame.

import { liveAnswer, startLive } from "./live.js";
import { el, list, num, setData, setText, str } from "./dom.js";
import { DiagramView } from "./diagram.js";
import { initSteps, showSteps } from "./codesteps.js";

const VENDOR = "/static/vendor/codemirror-5.65.21";
// The protocol's limit on a submission (docs/protocol.md): a larger one is
// refused here with the reason, not sent.
const MAX_SOURCE_BYTES = 64 * 1024;
// A check that has not come back in this long (a lost connection) no longer
// holds Check off.
const CHECK_HOLD_MS = 30_000;
const SAVE_MS = 300;

// The languages a student can write in, by the names the protocol uses.
const LANGUAGES = { rescript: "ReScript", javascript: "JavaScript" };
// What the page says when /code.json does not answer (a lab older than
// issue 41): JavaScript alone.
const NO_CONFIG = {
  languages: ["javascript"],
  default: "javascript",
  rescript: null,
  enable: "the lab's server has no ReScript compiler; your instructor can install ReScript 12.2.0 beside it.",
};
// The lesson's "What the compiler checks", as two tasks the lab ticks
// (the state's code.tasks) once a ReScript submission has shown them.
const TASKS = [
  ["missingRejected", "Delete the Rejected arm of view's switch and press Check: the build is refused at that match, naming Rejected."],
  ["addCancelled", "Add Cancelled to the status type and press Check: each match on the status is listed, naming Cancelled."],
];

// SKELETON is what the JavaScript editor starts with: the four functions
// with the lesson's shapes, loading but failing most cases, each saying what
// it must do. The ReScript one is ToolCall.res, fetched when first needed.
export const SKELETON = `// Your ToolCall module: the lab calls these four functions exactly as the
// lesson's main.js does, and compares what view and the notices show with its
// own model after every step. Plain JavaScript or the lesson's compiled
// ReScript (an ES module ending in export { ... }, no imports).
// A call value is yours: the lab never looks inside it, only at view(call).

// begin: a new call for runId and callId, Pending, with no result yet.
export function begin(runId, callId) {
  return { runId, callId, status: "Pending", detail: "" };
}

// receive: raw is the reply's text as it was queued. Return { call, notice }.
// - text that JSON.parse refuses: the call unchanged, with the notice
//   "Invalid JSON: could not parse message."
// - JSON that is not an object with string runId and callId and either
//   kind "completed" with a string output or kind "rejected" with a string
//   reason: unchanged, "Invalid reply: expected string identifiers and a
//   completed output or rejected reason."
// - identifiers that are not exactly this call's: unchanged,
//   "Ignored reply: different call identity."
// - a call already Completed or Rejected: unchanged,
//   "Ignored reply: final outcome already recorded."
// - otherwise (Pending or Unresolved): a NEW call, Completed with the output
//   ("Accepted completion.") or Rejected with the reason ("Accepted
//   rejection."). Never change the call you were given.
export function receive(call, raw) {
  // TODO: parse, decode, compare the identifiers, apply the transition.
  return { call, notice: "Ignored reply: different call identity." };
}

// expire: a deadline observed for runId and callId (what view showed when
// it was queued). Return { call, notice }.
// - identifiers that are not this call's: unchanged,
//   "Ignored deadline: different call identity."
// - Pending: a NEW call, Unresolved,
//   "Unresolved: deadline observed without a final reply."
// - Unresolved: unchanged, "Still unresolved: no final reply."
// - Completed or Rejected: unchanged,
//   "Ignored deadline: final outcome already recorded."
export function expire(call, runId, callId) {
  // TODO: compare the identifiers and apply the transition.
  return { call, notice: "Ignored deadline: different call identity." };
}

// view: what the page shows, four strings. status is "Pending",
// "Completed", "Rejected" or "Unresolved"; detail is "" while Pending, the
// output or the reason once final, and for Unresolved
// "No final reply observed. A matching late reply can still resolve this call."
export function view(call) {
  return { runId: call.runId, callId: call.callId, status: call.status, detail: call.detail };
}
`;

const STATUS_WORDS = {
  checking: "Checking…",
  passed: "Passed",
  failed: "Failed",
  error: "Error",
};

const panel = {
  send: null, // (frame) => bool, lab.js's send
  sendLive: null, // (frame) => bool, lab.js's quiet send (live.js)
  types: false, // the lab says types under the pointer (GET /code.json)
  liveNote: null, // what the compiler says as the student types, in words
  liveCode: null, // the live compile shown, as a code object
  key: "", // the localStorage key of this session's drafts (lab.code.<id>)
  config: null, // the promise of /code.json's answer, once asked
  languages: ["javascript"], // the languages the lab offers
  lang: "javascript", // the language in the editor
  langSeq: 0, // the last language switch asked for
  skeletons: { javascript: SKELETON }, // the ReScript one once fetched
  radios: {}, // language -> its radio button
  langBox: null,
  langNote: null,
  label: null,
  tasks: null,
  taskItems: null, // task name -> {li, state}
  diag: null, // the compiler's messages under the editor
  diagTitle: null,
  diagList: null,
  diagKey: "",
  marks: [], // the editor's marks of the compiler's ranges
  gutters: [], // line handles with a gutter sign
  section: null,
  toggle: null,
  summary: null,
  body: null,
  textarea: null,
  editor: null, // the CodeMirror instance, once loaded
  loading: null, // the promise of the editor's scripts
  check: null,
  keysNote: null,
  status: null,
  error: null,
  failure: null,
  failureTitle: null,
  property: null,
  steps: null, // the failing trace's <tbody>
  diff: null, // the failing step in full
  svgBox: null,
  svgStatus: null,
  svgView: null,
  svgKey: "", // the failure the drawing was asked for
  svgSeq: 0,
  own: null,
  ownList: null,
  dialog: null,
  waiting: null, // { submission, timer } while this tab's check is out
  marked: [], // the editor line handles with a background
  last: null, // the last state's code
  lastKey: "", // its JSON, to tell a new result from the one shown
  saveTimer: 0,
  leaving: false, // Esc was pressed in the editor: the next Tab leaves it
};

// initCode builds the panel into section (an empty <section id="code">).
// send(frame) sends a frame on the page's socket and returns whether it did;
// sessionId names the draft and the failure's drawing; play(frame) sends a
// frame of a case played in the lab (codesteps.js).
export function initCode(section, { send, sendLive, sessionId, play }) {
  if (!section || !sessionId) return;
  initSteps({ sessionId, play });
  panel.send = send;
  panel.sendLive = sendLive ?? (() => false);
  panel.section = section;
  panel.key = `lab.code.${sessionId}`;

  const heading = el("h2", "code-heading");
  const toggle = el("button", "disclosure");
  toggle.type = "button";
  toggle.id = "code-toggle";
  toggle.setAttribute("aria-expanded", "false");
  toggle.setAttribute("aria-controls", "code-panel");
  toggle.append(el("span", "", "Write the client"));
  panel.summary = el("span", "code-summary");
  panel.summary.id = "code-summary";
  toggle.append(panel.summary);
  heading.append(toggle);
  panel.toggle = toggle;

  const body = el("div", "code-panel");
  body.id = "code-panel";
  body.hidden = true;
  panel.body = body;
  const intro = el(
    "p",
    "hint",
    "Write the module the lesson is about: begin, receive, expire and view, in ReScript (the lab compiles it with the lesson's flags) or in JavaScript. Check plays the walkthrough's nine steps and a few hundred random traces on your module and on the lab's own model, and compares what they show and say after every step.",
  );
  const label = el("label", "code-label", "Your ToolCall module (JavaScript)");
  label.htmlFor = "code-source";
  label.id = "code-label";
  panel.label = label;
  panel.textarea = el("textarea", "code-source");
  panel.textarea.id = "code-source";
  panel.textarea.spellcheck = false;
  panel.textarea.setAttribute("autocomplete", "off");
  panel.textarea.setAttribute("autocapitalize", "off");
  panel.textarea.setAttribute("aria-describedby", "code-keys");
  panel.textarea.value = loadDraft();
  const editorBox = el("div", "code-editor");
  editorBox.id = "code-editor";
  editorBox.append(panel.textarea);
  panel.keysNote = el(
    "p",
    "hint",
    "In the editor Tab indents; to leave the editor press Esc, then Tab (or Shift+Tab). Ctrl+Enter checks. The compiler's messages are marked as you type, at each pause. In ReScript, Ctrl+I says the type of the name at the cursor; resting the pointer on a name shows it too.",
  );
  panel.keysNote.id = "code-keys";
  panel.liveNote = el("p", "hint code-live-note");
  panel.liveNote.id = "code-live-note";

  const actions = el("div", "actions");
  panel.check = el("button", "", "Check");
  panel.check.type = "button";
  panel.check.id = "code-check";
  panel.check.setAttribute("aria-keyshortcuts", "Control+Enter");
  const reset = el("button", "", "Reset to the skeleton");
  reset.type = "button";
  reset.id = "code-reset";
  actions.append(panel.check, reset);

  panel.status = el("p", "code-status");
  panel.status.id = "code-status";
  panel.status.setAttribute("role", "status");
  panel.error = el("p", "code-error");
  panel.error.id = "code-error";
  panel.error.hidden = true;

  body.append(
    intro,
    buildLanguages(),
    buildTasks(),
    label,
    editorBox,
    panel.keysNote,
    panel.liveNote,
    actions,
    panel.status,
    buildDiagnostics(),
    panel.error,
    buildFailure(sessionId),
    buildCoverage(),
    buildOwn(),
  );
  panel.dialog = buildDialog();
  section.setAttribute("aria-labelledby", "code-toggle");
  section.replaceChildren(heading, body, panel.dialog);
  section.hidden = false;

  toggle.addEventListener("click", () => setOpen(body.hidden));
  panel.check.addEventListener("click", check);
  reset.addEventListener("click", () => panel.dialog.showModal());
  panel.textarea.addEventListener("input", saveSoon);
  panel.textarea.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      check();
    }
  });
  window.addEventListener("pagehide", saveNow);
  if (readStore(`${panel.key}.open`) === "true") setOpen(true);
  renderSummary();
}

// buildLanguages builds the language choice: a radio group of the languages
// /code.json offers (hidden until it answers, and when it offers one), and
// a note saying what the compiler does, or why ReScript is not offered.
function buildLanguages() {
  const box = el("div", "code-languages");
  const group = el("fieldset", "code-language-choice");
  group.id = "code-language";
  group.hidden = true;
  group.append(el("legend", "", "Language"));
  for (const [lang, name] of Object.entries(LANGUAGES)) {
    const label = el("label", "code-language-option");
    const radio = el("input");
    radio.type = "radio";
    radio.name = "code-language";
    radio.value = lang;
    radio.id = `code-lang-${lang}`;
    radio.checked = lang === panel.lang;
    radio.addEventListener("change", () => {
      if (radio.checked) chooseLanguage(lang, true);
    });
    panel.radios[lang] = radio;
    label.append(radio, document.createTextNode(` ${name}`));
    group.append(label);
  }
  panel.langBox = group;
  panel.langNote = el("p", "hint code-language-note");
  panel.langNote.id = "code-lang-note";
  box.append(group, panel.langNote);
  return box;
}

// buildTasks builds the two guided tasks of the lesson's "What the compiler
// checks", each with its state in words ("✓ done" or "not yet").
function buildTasks() {
  const box = el("div", "code-tasks");
  box.id = "code-tasks";
  box.hidden = true;
  const h = el("h3", "", "Try what the compiler checks");
  h.id = "code-tasks-heading";
  const ol = el("ol", "code-task-list");
  ol.id = "code-task-list";
  ol.setAttribute("aria-labelledby", h.id);
  panel.taskItems = {};
  for (const [name, text] of TASKS) {
    const li = el("li", "code-task");
    li.dataset.task = name;
    li.dataset.done = "false";
    const state = el("span", "code-task-state", "not yet");
    li.append(el("span", "", `${text} `), state);
    ol.append(li);
    panel.taskItems[name] = { li, state };
  }
  box.append(h, ol);
  panel.tasks = box;
  return box;
}

// buildDiagnostics builds the list of the compiler's messages: each a
// button that puts the cursor at its range.
function buildDiagnostics() {
  const box = el("div", "code-diagnostics");
  box.id = "code-diagnostics";
  box.hidden = true;
  panel.diagTitle = el("h3", "", "Compiler warnings");
  panel.diagTitle.id = "code-diagnostics-heading";
  panel.diagList = el("ol", "code-diagnostic-list");
  panel.diagList.id = "code-diagnostic-list";
  panel.diagList.setAttribute("aria-labelledby", panel.diagTitle.id);
  box.append(panel.diagTitle, panel.diagList);
  panel.diag = box;
  return box;
}

function buildFailure(sessionId) {
  const box = el("div", "code-failure");
  box.id = "code-failure";
  box.hidden = true;
  panel.failureTitle = el("h3", "", "The first failure");
  panel.failureTitle.id = "code-failure-title";
  panel.property = el("p", "code-property");
  panel.property.id = "code-property";
  const hint = el(
    "p",
    "hint",
    "The shortest trace the lab found that still fails, frame by frame: up to the highlighted step your module and the lab's model agree; at that step they differ.",
  );
  const table = el("table", "code-steps");
  table.id = "code-steps-table";
  const caption = el("caption", "visually-hidden", "The failing trace, step by step");
  const head = el("tr");
  for (const text of ["Step", "Frame", "Model and module"]) {
    const th = el("th", "", text);
    th.scope = "col";
    head.append(th);
  }
  const thead = el("thead");
  thead.append(head);
  panel.steps = el("tbody");
  panel.steps.id = "code-steps";
  table.append(caption, thead, panel.steps);
  const scroll = el("div", "scroll code-steps-scroll");
  scroll.tabIndex = 0;
  scroll.setAttribute("role", "region");
  scroll.setAttribute("aria-labelledby", "code-failure-title");
  scroll.append(table);
  // The differing step in full: the model's side and the module's, side by
  // side on a wide screen, one under the other on a phone.
  panel.diff = el("div", "code-diff");
  panel.diff.id = "code-diff";
  const drawn = el("h4", "", "The failure drawn");
  drawn.id = "code-failure-drawn";
  panel.svgBox = el("div", "diagram-scroll");
  panel.svgBox.id = "code-failure-svg";
  panel.svgBox.tabIndex = 0;
  panel.svgBox.setAttribute("role", "region");
  panel.svgBox.setAttribute("aria-labelledby", "code-failure-drawn");
  panel.svgStatus = el("p", "diagram-status");
  panel.svgStatus.id = "code-failure-svg-status";
  panel.svgStatus.setAttribute("role", "status");
  panel.svgView = new DiagramView(panel.svgBox, {
    status: (t) => setText(panel.svgStatus, t.replace("the session", "the failure")),
    active: false,
  });
  panel.svgView.show(`/lab/${encodeURIComponent(sessionId)}/code/failure.svg`);
  box.append(panel.failureTitle, panel.property, hint, scroll, panel.diff, drawn, panel.svgBox, panel.svgStatus);
  panel.failure = box;
  return box;
}

// buildCoverage is what the check's bounded search covered (issue 43): a
// sentence and the lesson's situations as a checklist.
function buildCoverage() {
  panel.coverage = el("div", "code-coverage");
  panel.coverage.hidden = true;
  const h = el("h3", "", "What the check covered");
  h.id = "code-coverage-heading";
  panel.coverageSummary = el("p");
  panel.coverageSummary.id = "code-coverage-summary";
  panel.coverageList = el("ul");
  panel.coverageList.id = "code-coverage";
  panel.coverageList.setAttribute("aria-labelledby", h.id);
  panel.coverage.append(h, panel.coverageSummary, panel.coverageList);
  return panel.coverage;
}

// coverageSentence says what the search checked, as the lab's model
// words it (model.Result.SearchSummary).
function coverageSentence(code, items) {
  const right = items.filter((c) => num(c?.hit) > 0 && c?.passed).length;
  const wrong = items.filter((c) => num(c?.hit) > 0 && !c?.passed).map((c) => str(c?.text));
  const states = num(code.explored).toLocaleString("en-US");
  const bound = code.exhausted ? `every sequence of up to ${num(code.depth)} steps` : `sequences of up to ${num(code.depth)} steps, not all of them`;
  let s = `Checked ${states} states, ${bound}: ${right} of ${items.length} situations right`;
  if (wrong.length) s += `; wrong: ${wrong.join(", ")}`;
  return s + ".";
}

function showCoverage(code) {
  const items = list(code?.coverage);
  panel.coverage.hidden = items.length === 0;
  if (items.length === 0) return;
  setText(panel.coverageSummary, coverageSentence(code, items) + (code.searchNote ? ` ${str(code.searchNote)}` : ""));
  const rows = items.map((c) => {
    const hit = num(c?.hit);
    const state = hit === 0 ? "not reached" : c?.passed ? "right" : "wrong";
    return el("li", hit === 0 ? "unreached" : c?.passed ? "passed" : "failed", `${str(c?.text)}: ${state}${hit ? ` (${hit.toLocaleString("en-US")} steps)` : ""}`);
  });
  const same = rows.length === panel.coverageList.children.length && rows.every((li, i) => li.textContent === panel.coverageList.children[i].textContent);
  if (!same) panel.coverageList.replaceChildren(...rows);
}

function buildOwn() {
  panel.own = el("div", "code-own");
  panel.own.hidden = true;
  const h = el("h3", "", "Cases added to your check");
  h.id = "code-own-heading";
  panel.ownList = el("ul");
  panel.ownList.id = "code-own";
  panel.ownList.setAttribute("aria-labelledby", h.id);
  panel.own.append(h, panel.ownList);
  return panel.own;
}

function buildDialog() {
  const d = el("dialog", "code-dialog");
  d.id = "code-reset-dialog";
  d.setAttribute("aria-labelledby", "code-reset-title");
  const title = el("h2", "", "Reset to the skeleton?");
  title.id = "code-reset-title";
  const text = el(
    "p",
    "",
    "Your code in the editor is replaced by the skeleton of the four functions in the language chosen, and this draft is gone. Results already checked stay.",
  );
  const actions = el("div", "actions");
  const yes = el("button", "", "Replace my code with the skeleton");
  yes.type = "button";
  yes.id = "code-reset-yes";
  const no = el("button", "", "Keep my code");
  no.type = "button";
  no.id = "code-reset-no";
  actions.append(yes, no);
  d.append(title, text, actions);
  yes.addEventListener("click", () => {
    d.close();
    withSkeleton(panel.lang, (text) => {
      setSource(text);
      saveNow();
      focusEditor();
    });
  });
  no.addEventListener("click", () => d.close());
  return d;
}

// ---- opening, the editor --------------------------------------------------

function setOpen(open) {
  panel.body.hidden = !open;
  panel.toggle.setAttribute("aria-expanded", String(open));
  writeStore(`${panel.key}.open`, String(open));
  panel.svgView.setActive(open && !panel.failure.hidden);
  if (open) {
    loadConfig();
    loadEditor().then(() => panel.editor?.refresh());
  }
}

// ---- the languages ------------------------------------------------------------

// loadConfig asks the lab once which languages it offers (GET /code.json)
// and puts the editor in the student's: the last one chosen in this
// session, else the lab's default. No answer means JavaScript alone.
function loadConfig() {
  if (panel.config) return panel.config;
  panel.config = fetch("/code.json", { headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : NO_CONFIG))
    .catch(() => NO_CONFIG)
    .then(applyConfig);
  return panel.config;
}

function applyConfig(config) {
  const cfg = config && typeof config === "object" ? config : NO_CONFIG;
  const offered = list(cfg.languages).filter((l) => Object.hasOwn(LANGUAGES, l));
  panel.languages = offered.length > 0 ? offered : ["javascript"];
  const rescript = panel.languages.includes("rescript");
  panel.types = rescript && cfg.rescript?.types === true;
  for (const [lang, radio] of Object.entries(panel.radios)) radio.parentElement.hidden = !panel.languages.includes(lang);
  panel.langBox.hidden = panel.languages.length < 2;
  if (rescript) {
    // The number alone; a lab before issue 52 sent the compiler's own
    // "ReScript 12.2.0".
    const version = str(cfg.rescript?.version).replace(/^ReScript\s+/, "");
    setText(
      panel.langNote,
      `ReScript${version ? ` ${version}` : ""} is compiled with the lesson's flags: a case a switch forgets, or an unused variable, stops the build (name a parameter you do not use yet with a leading _, as _raw).`,
    );
    fetchSkeleton("rescript"); // ready before it is asked for
  } else {
    const enable = str(cfg.enable) || NO_CONFIG.enable;
    setText(panel.langNote, `Language: JavaScript. ReScript is not available in this lab: ${enable}`);
  }
  const stored = readStore(`${panel.key}.language`);
  const def = str(cfg.default);
  const want = panel.languages.includes(stored) ? stored : panel.languages.includes(def) ? def : panel.languages[0];
  setData(panel.section, "languages", panel.languages.join(" "));
  return chooseLanguage(want, false);
}

const draftKey = (lang) => (lang === "rescript" ? `${panel.key}.draft.rescript` : `${panel.key}.draft`);

// fetchSkeleton fetches a language's skeleton once (the JavaScript one is
// SKELETON); the promise gives its text.
function fetchSkeleton(lang) {
  const have = panel.skeletons[lang];
  if (typeof have === "string") return Promise.resolve(have);
  if (have) return have;
  const p = fetch("/static/ToolCall.res")
    .then((r) => {
      if (!r.ok) throw new Error(`ToolCall.res: ${r.status}`);
      return r.text();
    })
    .then((text) => {
      panel.skeletons[lang] = text;
      return text;
    })
    .catch(() => {
      delete panel.skeletons[lang];
      return "// The ReScript skeleton could not be loaded: reload the page to try again.\n";
    });
  panel.skeletons[lang] = p;
  return p;
}

// withSkeleton calls fn with a language's skeleton: at once when it is
// here, else once fetched.
function withSkeleton(lang, fn) {
  const have = panel.skeletons[lang];
  if (typeof have === "string") fn(have);
  else fetchSkeleton(lang).then(fn);
}

// chooseLanguage puts lang in the editor: the draft of the language left is
// saved, lang's own draft (or its skeleton) replaces the text, and the
// editor's mode, its label and the tasks follow. remember keeps the choice
// for this session.
async function chooseLanguage(lang, remember) {
  if (!panel.languages.includes(lang)) lang = panel.languages[0];
  const seq = ++panel.langSeq;
  if (remember) writeStore(`${panel.key}.language`, lang);
  if (lang !== panel.lang) {
    saveNow();
    const stored = readStore(draftKey(lang));
    const text = stored ?? (await fetchSkeleton(lang));
    if (seq !== panel.langSeq) return;
    panel.lang = lang;
    setSource(text);
    panel.editor?.clearHistory();
  }
  showLanguage();
}

// showLanguage brings what depends on the language up to date.
function showLanguage() {
  const lang = panel.lang;
  const name = LANGUAGES[lang];
  for (const [l, radio] of Object.entries(panel.radios)) radio.checked = l === lang;
  setText(panel.label, `Your ToolCall module (${name})`);
  panel.tasks.hidden = lang !== "rescript";
  setData(panel.section, "language", lang);
  if (panel.editor) {
    if (panel.editor.getOption("mode") !== lang) panel.editor.setOption("mode", lang);
    panel.editor.setOption("screenReaderLabel", screenReaderLabel());
  }
  markError(panel.last);
}

const screenReaderLabel = () => `Your ToolCall module (${LANGUAGES[panel.lang]}). Esc then Tab leaves the editor.`;

// loadEditor loads CodeMirror's scripts once (classic scripts, from this
// server: the CSP allows them) and replaces the textarea with the editor.
// If they fail, the textarea stays and works.
function loadEditor() {
  if (panel.loading) return panel.loading;
  panel.loading = loadScript(`${VENDOR}/lib/codemirror.js`)
    .then(() => loadScript(`${VENDOR}/mode/javascript/javascript.js`))
    .then(() => loadScript(`${VENDOR}/addon/mode/simple.js`))
    .then(() => loadScript("/static/rescript-mode.js"))
    .then(makeEditor)
    .catch(() => setText(panel.status, "The code editor could not be loaded; the plain text box works the same."));
  return panel.loading;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.addEventListener("load", resolve);
    s.addEventListener("error", () => reject(new Error(`${src} did not load`)));
    document.head.append(s);
  });
}

function makeEditor() {
  const CM = window.CodeMirror;
  if (!CM) throw new Error("no CodeMirror");
  const editor = CM.fromTextArea(panel.textarea, {
    mode: panel.lang,
    lineNumbers: true,
    indentUnit: 2,
    tabSize: 2,
    gutters: ["code-error-gutter", "CodeMirror-linenumbers"],
    // On a phone long lines wrap rather than scroll sideways.
    lineWrapping: window.matchMedia("(max-width: 40rem)").matches,
    // contenteditable lets a screen reader read the text as it is.
    inputStyle: "contenteditable",
    screenReaderLabel: screenReaderLabel(),
    extraKeys: {
      Esc: () => {
        panel.leaving = true;
      },
      Tab: (cm) => cm.execCommand(cm.somethingSelected() ? "indentMore" : "insertSoftTab"),
      "Shift-Tab": (cm) => cm.execCommand("indentLess"),
      "Ctrl-Enter": () => check(),
      "Cmd-Enter": () => check(),
    },
  });
  // After Esc, a Tab is left to the browser, which moves the focus on
  // (codemirrorIgnore keeps every keymap of the editor out of it).
  editor.on("keydown", (_cm, event) => {
    if (event.key === "Tab" && panel.leaving) {
      event.codemirrorIgnore = true;
      panel.leaving = false;
    } else if (!["Escape", "Shift"].includes(event.key)) {
      panel.leaving = false;
    }
  });
  editor.on("blur", () => {
    panel.leaving = false;
  });
  editor.on("changes", saveSoon);
  // The label names the editor's input too.
  editor.getInputField().setAttribute("aria-describedby", "code-keys");
  document.getElementById("code-label")?.addEventListener("click", () => editor.focus());
  panel.editor = editor;
  window.labCodeEditor = editor; // for the browser tests and the curious
  if (panel.last) markError(panel.last);
  startLive(editor, {
    send: (frame) => panel.sendLive(frame),
    lang: () => panel.lang,
    types: () => panel.types,
    show: showLive,
    say: (text) => setText(panel.liveNote, text),
  });
}

// codeLive takes a compiled, typeAt or error frame with an id (live.js's).
export function codeLive(frame) {
  liveAnswer(frame);
}

// showLive shows what the compiler said of the editor's text as it was
// typed, in place of the messages shown before (a check's or an earlier
// live compile's): marked in the editor and listed under it.
function showLive(diagnostics, lang, error) {
  if (lang !== panel.lang) return;
  const errors = diagnostics.filter((d) => d?.severity === "error").length;
  const code = { live: true, language: lang, compiler: diagnostics, status: errors > 0 ? "error" : "passed" };
  panel.liveCode = code;
  let note = "As you type: the compiler says nothing.";
  if (error) note = `As you type: ${error}`;
  else if (errors > 0) note = `As you type: ${errors} problem${errors === 1 ? "" : "s"}, listed below.`;
  else if (diagnostics.length > 0) note = "As you type: the compiler's warnings are listed below.";
  setText(panel.liveNote, note);
  setData(panel.section, "live", String(diagnostics.length));
  showDiagnostics(code);
  markError(code);
}

function source() {
  return panel.editor ? panel.editor.getValue() : panel.textarea.value;
}

function setSource(text) {
  if (panel.editor) panel.editor.setValue(text);
  else panel.textarea.value = text;
}

function focusEditor(line) {
  if (panel.editor) {
    if (line) panel.editor.setCursor({ line: line - 1, ch: 0 });
    panel.editor.focus();
  } else {
    panel.textarea.focus();
  }
}

// ---- the draft --------------------------------------------------------------

function readStore(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null; // storage off: the draft lives as long as the page
  }
}

function writeStore(key, value) {
  try {
    localStorage.setItem(key, value);
  } catch {
    // full or off: nothing to do but keep the page working
  }
}

// loadDraft is the JavaScript draft, the editor's text until /code.json
// says which language the student writes in.
function loadDraft() {
  return readStore(draftKey("javascript")) ?? SKELETON;
}

function saveSoon() {
  clearTimeout(panel.saveTimer);
  panel.saveTimer = setTimeout(saveNow, SAVE_MS);
}

function saveNow() {
  clearTimeout(panel.saveTimer);
  panel.saveTimer = 0;
  if (panel.section) writeStore(draftKey(panel.lang), source());
}

// ---- checking ---------------------------------------------------------------

function check() {
  if (panel.waiting) return;
  const text = source();
  saveNow();
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_SOURCE_BYTES) {
    setText(panel.status, `Not checked: your module is ${bytes} bytes, more than the ${MAX_SOURCE_BYTES} the lab takes.`);
    return;
  }
  if (!panel.send({ type: "submitCode", source: text, language: panel.lang })) return;
  const timer = setTimeout(endWait, CHECK_HOLD_MS);
  panel.waiting = { submission: num(panel.last?.submission), timer };
  panel.check.setAttribute("aria-disabled", "true");
  setData(panel.section, "checking", "true");
  setText(panel.status, "Checking…");
}

function endWait() {
  if (!panel.waiting) return;
  clearTimeout(panel.waiting.timer);
  panel.waiting = null;
  panel.check.removeAttribute("aria-disabled");
  setData(panel.section, "checking", "false");
}

// codeRefused takes an error frame: a check this tab is waiting for will not
// come (a source over the limit, too many checks); lab.js shows the words.
export function codeRefused(frame) {
  if (!panel.waiting) return;
  endWait();
  setText(panel.status, `Not checked: ${str(frame?.error) || "the lab refused the check."}`);
}

// ---- the result -------------------------------------------------------------

// renderCode takes a state frame and shows its "code" result; a state
// whose code is the one shown changes nothing (most states are other
// actions), so a focused control in the result stays.
export function renderCode(state) {
  if (!panel.section) return;
  const code = state?.code && typeof state.code === "object" ? state.code : null;
  if (panel.waiting && code && num(code.submission) > panel.waiting.submission && code.status !== "checking") endWait();
  const key = JSON.stringify(code);
  const fresh = key !== panel.lastKey;
  panel.last = code;
  panel.lastKey = key;
  renderSummary();
  if (panel.waiting) setText(panel.status, "Checking…");
  else if (!code) setText(panel.status, "Not checked yet.");
  else setText(panel.status, statusSentence(code));
  if (!fresh) return;
  setData(panel.section, "status", code ? str(code.status) : "");
  // A refused build's error only counts the problems the list under the
  // editor shows one by one.
  const error = refused(code) ? "" : str(code?.error);
  panel.error.hidden = error === "";
  if (error) fillError(error, errorLine(code));
  else panel.error.replaceChildren();
  showDiagnostics(code);
  showTasks(code);
  markError(code);
  showFailure(code && (code.status === "failed" || code.status === "error") ? code.failure : null, code);
  showCoverage(code);
  showOwn(list(code?.own));
}

function statusSentence(code) {
  const n = num(code.submission);
  const which = n > 0 ? `Submission ${n}: ` : "";
  const cases = `${num(code.passed)} of ${num(code.cases)} cases passed (seed ${num(code.seed)})`;
  switch (code.status) {
    case "checking":
      return `${which}checking…`;
    case "passed":
      return `${which}passed: ${cases}.`;
    case "failed":
      return `${which}failed: ${cases}.`;
    case "error":
      if (refused(code)) return `${which}does not compile: ${problems(code)}.`;
      return num(code.cases) > 0 ? `${which}error: ${cases}.` : `${which}error: the module could not be checked.`;
    default:
      return `${which}${str(code.status)}`;
  }
}

function renderSummary() {
  const code = panel.last;
  let text = "";
  if (panel.waiting || code?.status === "checking") text = "checking…";
  else if (refused(code)) text = `does not compile: ${problems(code)}`;
  else if (code) text = `${(STATUS_WORDS[str(code.status)] ?? str(code.status)).toLowerCase()}, ${num(code.passed)} of ${num(code.cases)} cases`;
  setText(panel.summary, text ? ` (${text})` : "");
}

const languageOf = (code) => (code?.language === "rescript" ? "rescript" : "javascript");
const diagnostics = (code) => list(code?.compiler).filter((d) => d && typeof d === "object" && num(d.line) > 0);

// refused says whether code is a build the compiler refused: an error with
// at least one of the compiler's messages an error.
function refused(code) {
  return code?.status === "error" && diagnostics(code).some((d) => d.severity === "error");
}

// problems counts a refused build's problems ("3 problems", "1 problem"), as
// the lab's error says, else the compiler's errors.
function problems(code) {
  const m = /(\d+) problems?\b/.exec(str(code.error));
  const n = m ? Number(m[1]) : diagnostics(code).filter((d) => d.severity === "error").length;
  return `${n} problem${n === 1 ? "" : "s"}`;
}

// errorLine is the 1-based line the result blames: the frame's line for a
// syntax error, else the first "line N" its error names; 0 if none. A
// ReScript program's runtime errors name lines of the compiled JavaScript,
// not of the source: none.
function errorLine(code) {
  if (languageOf(code) === "rescript") return 0;
  if (num(code.line) > 0) return num(code.line);
  const m = /\bline (\d+)/.exec(`${str(code.error)} ${str(code.failure?.got?.error)}`);
  return m ? Number(m[1]) : 0;
}

function fillError(text, line) {
  const parts = [el("strong", "", "Error: "), document.createTextNode(text)];
  if (line > 0) {
    const go = el("button", "link-button", `Go to line ${line}`);
    go.type = "button";
    go.id = "code-error-line";
    go.addEventListener("click", () => {
      if (panel.body.hidden) setOpen(true);
      loadEditor().then(() => focusEditor(line));
    });
    parts.push(document.createTextNode(" "), go);
  }
  panel.error.replaceChildren(...parts);
}

// markError marks what the result blames in the editor, and unmarks what
// it marked before: for ReScript each of the compiler's ranges (an error's
// with a background on its first line and a "!" in the gutter, a warning's
// underlined); for JavaScript the line the error names. Nothing is marked
// in the other language's text.
function markError(code) {
  const editor = panel.editor;
  if (!editor) return;
  editor.operation(() => {
    for (const m of panel.marks) m.clear();
    for (const h of panel.marked) editor.removeLineClass(h, "background", "code-error-line");
    for (const h of panel.gutters) editor.setGutterMarker(h, "code-error-gutter", null);
    panel.marks = [];
    panel.marked = [];
    panel.gutters = [];
    if (!code || languageOf(code) !== panel.lang) return;
    if (panel.lang === "rescript" || code.live) {
      for (const d of diagnostics(code)) markRange(editor, d);
      return;
    }
    const line = code.status === "error" || code.failure?.got?.error ? errorLine(code) : 0;
    if (line <= 0 || line > editor.lineCount()) return;
    const sign = el("span", "code-error-sign", "!");
    sign.title = str(code.error) || str(code.failure?.got?.error);
    const h = editor.addLineClass(line - 1, "background", "code-error-line");
    editor.setGutterMarker(h, "code-error-gutter", sign);
    panel.marked.push(h);
    panel.gutters.push(h);
  });
}

// rangeOf turns a compiler message's 1-based positions (its end column the
// range's last character) into the editor's, kept inside the text.
function rangeOf(d, lineCount, lineLength) {
  const clampLine = (n) => Math.min(Math.max(n, 1), lineCount) - 1;
  const fromLine = clampLine(num(d.line));
  const from = { line: fromLine, ch: Math.min(Math.max(num(d.column) - 1, 0), lineLength(fromLine)) };
  const toLine = clampLine(num(d.endLine) || num(d.line));
  let to = { line: toLine, ch: Math.min(Math.max(num(d.endColumn) || num(d.column), 0), lineLength(toLine)) };
  if (to.line < from.line || (to.line === from.line && to.ch <= from.ch)) to = { line: from.line, ch: Math.min(from.ch + 1, lineLength(from.line)) };
  return { from, to };
}

function markRange(editor, d) {
  if (num(d.line) > editor.lineCount()) return;
  const { from, to } = rangeOf(d, editor.lineCount(), (l) => editor.getLine(l).length);
  const error = d.severity === "error";
  const attributes = { title: diagnosticText(d) };
  if (typeof d.warning === "number") attributes["data-warning"] = String(d.warning);
  if (to.line > from.line || to.ch > from.ch) panel.marks.push(editor.markText(from, to, { className: error ? "code-diag-error" : "code-diag-warning", attributes }));
  if (!error) return;
  const sign = el("span", "code-error-sign", "!");
  sign.title = diagnosticText(d);
  const h = editor.addLineClass(from.line, "background", "code-error-line");
  editor.setGutterMarker(h, "code-error-gutter", sign);
  panel.marked.push(h);
  panel.gutters.push(h);
}

// diagnosticText says one compiler message: "Line 104, column 26: Warning 8
// (error): You forgot to handle a possible case here, …".
function diagnosticText(d) {
  const severity = d.severity === "warning" ? "warning" : "error";
  let kind = severity === "error" ? "Error" : "Warning";
  if (typeof d.warning === "number") kind = `Warning ${d.warning} (${severity})`;
  return `Line ${num(d.line)}, column ${num(d.column)}: ${kind}: ${str(d.text).trim()}`;
}

// showDiagnostics lists the compiler's messages under the editor, each a
// button to its range: a refused build's under "Compiler errors", a built
// program's warnings under "Compiler warnings".
function showDiagnostics(code) {
  const items = diagnostics(code);
  panel.diag.hidden = items.length === 0;
  const title = refused(code) ? `Compiler errors: ${problems(code)}` : "Compiler warnings";
  setText(panel.diagTitle, code?.live ? `${title}, as you type` : title);
  // The same messages (a check's, then the live compile's of the same
  // text) keep their items: a focused one stays focused.
  const key = JSON.stringify([languageOf(code), items]);
  if (key === panel.diagKey) return;
  panel.diagKey = key;
  panel.diagList.replaceChildren(
    ...items.map((d, i) => {
      const li = el("li", d.severity === "warning" ? "code-diagnostic warning" : "code-diagnostic error");
      const go = el("button", "link-button code-diagnostic-go", diagnosticText(d));
      go.type = "button";
      go.id = `code-diagnostic-${i + 1}`;
      go.dataset.line = String(num(d.line));
      if (typeof d.warning === "number") go.dataset.warning = String(d.warning);
      go.addEventListener("click", () => goToRange(d, languageOf(code)));
      li.append(go);
      return li;
    }),
  );
}

// goToRange puts the editor's cursor at the start of a compiler message's
// range (in the plain text box, selects the range) and focuses the editor.
async function goToRange(d, lang) {
  if (panel.body.hidden) setOpen(true);
  if (lang !== panel.lang) await chooseLanguage(lang, true);
  await loadEditor();
  const editor = panel.editor;
  if (editor) {
    const { from, to } = rangeOf(d, editor.lineCount(), (l) => editor.getLine(l).length);
    editor.setCursor(from);
    editor.scrollIntoView({ from, to }, 40);
    editor.focus();
    return;
  }
  const lines = panel.textarea.value.split("\n");
  const { from, to } = rangeOf(d, lines.length, (l) => lines[l].length);
  const offset = (pos) => lines.slice(0, pos.line).reduce((n, l) => n + l.length + 1, 0) + pos.ch;
  panel.textarea.focus();
  panel.textarea.setSelectionRange(offset(from), offset(to));
}

// showTasks ticks the lesson's two compiler tasks the student has done.
function showTasks(code) {
  const tasks = code?.tasks && typeof code.tasks === "object" ? code.tasks : {};
  for (const [name, { li, state }] of Object.entries(panel.taskItems)) {
    const done = tasks[name] === true;
    setText(state, done ? "✓ done" : "not yet");
    setData(li, "done", String(done));
  }
}

// ---- the failure, step by step -------------------------------------------------

function showFailure(failure, code) {
  const f = failure && typeof failure === "object" ? failure : null;
  panel.failure.hidden = f === null;
  if (!f) {
    panel.svgView.setActive(false);
    panel.svgKey = "";
    panel.steps.replaceChildren();
    panel.diff.replaceChildren();
    return;
  }
  setText(panel.failureTitle, `The first failure: ${str(f.case)}`);
  const property = str(code?.property) || str(f.property);
  setText(panel.property, property ? `The failure in words: ${property}.` : "");
  const key = JSON.stringify([num(code?.submission), f]);
  if (key !== panel.svgKey) {
    panel.svgKey = key;
    panel.steps.replaceChildren(...stepRows(f));
    showSteps(f, { submission: num(code?.submission), tbody: panel.steps, diff: panel.diff, svgBox: panel.svgBox });
    panel.svgSeq += 1;
    panel.svgView.changed(panel.svgSeq);
  }
  panel.svgView.setActive(!panel.body.hidden);
}

// stepRows builds a row per frame of the failing trace, the frame in words
// (the held messages numbered as the lab numbers them), and fills the
// comparison of the failing step. Before it both agree; after it nothing
// was played.
function stepRows(f) {
  const frames = list(f.frames);
  const step = num(f.step);
  let queued = 0;
  const rows = frames.map((frame, i) => {
    const tr = el("tr");
    tr.dataset.step = String(i);
    const n = el("th", "", String(i + 1));
    n.scope = "row";
    let what;
    switch (frame?.type) {
      case "start":
        what = "Start a new run";
        break;
      case "queueReply":
        queued += 1;
        what = `Queue message ${queued}, a reply: ${str(frame.raw)}`;
        break;
      case "queueDeadline":
        queued += 1;
        what = `Queue message ${queued}, a deadline for the current call`;
        break;
      case "deliver":
        what = `Deliver message ${num(frame.message)}`;
        break;
      default:
        what = JSON.stringify(frame);
    }
    const frameCell = el("td", "code-frame", what);
    const result = el("td", "code-same", i < step ? "Same" : "Not played");
    if (i === step) {
      tr.className = "code-differs";
      tr.setAttribute("aria-current", "step");
      result.className = "";
      result.textContent = "Differ: see below";
    }
    tr.append(n, frameCell, result);
    return tr;
  });
  const want = f.expected ?? {};
  const have = f.got ?? {};
  const model = el("div", "code-side-box");
  model.append(el("h5", "", "The lab's model"));
  fillSide(model, want.call, str(want.notice), null, have.call, have.notice);
  const mine = el("div", "code-side-box");
  mine.append(el("h5", "", "Your module"));
  fillSide(mine, have.call, have.notice, have.error, want.call, str(want.notice));
  const title = el("h4", "", `At step ${step + 1}, where they differ (the differences marked)`);
  title.id = "code-diff-title";
  const pair = el("div", "code-pair");
  pair.append(model, mine);
  panel.diff.replaceChildren(title, pair);
  return rows;
}

// fillSide writes one side of the failing step: "Shows" (the view's four
// fields) and "Says" (the notice), marking what differs from the other side.
function fillSide(box, call, notice, error, otherCall, otherNotice) {
  const dl = el("dl", "code-side");
  const shows = el("dd");
  if (call && typeof call === "object" && !Array.isArray(call)) {
    const other = otherCall && typeof otherCall === "object" ? otherCall : {};
    for (const field of ["runId", "callId", "status", "detail"]) {
      const has = field in call;
      const v = has ? JSON.stringify(call[field]) : "(missing)";
      const line = el("span", "code-field");
      line.append(document.createTextNode(`${field}: `));
      const value = JSON.stringify(call[field]) === JSON.stringify(other[field]) ? document.createTextNode(v) : el("mark", "", v);
      line.append(value);
      shows.append(line);
    }
  } else {
    shows.textContent = call === null || call === undefined ? "(no view)" : JSON.stringify(call);
    if (JSON.stringify(call) !== JSON.stringify(otherCall)) shows.className = "code-marked";
  }
  dl.append(el("dt", "", "Shows"), shows);
  const says = el("dd");
  if (typeof notice === "string") {
    if (notice === otherNotice) says.textContent = notice === "" ? "(empty)" : notice;
    else says.append(el("mark", "", notice === "" ? "(empty)" : notice));
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

function showOwn(items) {
  panel.own.hidden = items.length === 0;
  const rows = items.map((c) => {
    const li = el("li", c?.passed ? "passed" : "failed", `${str(c?.case)}: ${c?.passed ? "passes" : "fails"}`);
    return li;
  });
  const same = rows.length === panel.ownList.children.length && rows.every((li, i) => li.textContent === panel.ownList.children[i].textContent);
  if (!same) panel.ownList.replaceChildren(...rows);
}
