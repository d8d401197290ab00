// The console's progress board: one row per student with the nine steps of
// the exercise (done, current, not yet), the time on the current step, a
// stuck flag and prediction accuracy; above it the class's step
// distribution and its predictions by kind of message ("2 of 3 expected a
// stale reply to be accepted"). Drawn from the overview frames (rows and
// their "exercise" summary), so it is as live as the class table and
// coalesced the same way. The server decides every tick; this page only
// counts the time on a step on, between frames, with the server's clock.
//
// instructor.js calls initProgress once and renderProgress with every
// overview frame. All text goes through textContent.

import { misconceptionChart } from "./diagram.js";
import { byId, classPath, classScope, el, KeyedList, list, num, setData, setText, str } from "./dom.js";
import { codeCells, codeHeaders, codeSummaryBox, drawCodeSummary } from "./codeboard.js";

const STEPS = 9;
const REFRESH_MS = 5000; // how often the times on a step move on between frames

const board = {
  section: null,
  grid: null, // the mastery grid (drawMastery)
  gridKey: "",
  distribution: null,
  misconceptions: null,
  misconceptionsEmpty: null,
  chart: null, // the chart's scrolling box
  chartKey: "", // the numbers it was drawn from
  body: null,
  rows: null, // KeyedList of the table's rows
  frame: null, // the last overview frame
  offsetMs: 0, // this browser's clock minus the server's
  stuckAfterMs: 5 * 60 * 1000,
  drawFrame: 0,
  timer: 0,
};

const label = (row) => str(row.name) || str(row.id).slice(0, 8);

// initProgress builds the board into section #progress.
export function initProgress() {
  const section = byId("progress");
  if (!section) return;
  board.section = section;
  const heading = el("h2", "", "Progress");
  heading.id = "progress-heading";
  section.setAttribute("aria-labelledby", heading.id);
  board.distribution = el("p", "distribution");
  board.distribution.id = "step-distribution";
  const mHeading = el("h3", "", "Predictions by kind of message");
  board.misconceptions = el("ul", "misconceptions");
  board.misconceptions.id = "misconceptions";
  board.misconceptionsEmpty = el("p", "empty", "No predictions yet.");
  // The chart, then the same numbers with what was predicted, as sentences.
  board.chart = el("div", "scroll chart");
  board.chart.tabIndex = 0;
  board.chart.setAttribute("role", "region");
  board.chart.setAttribute("aria-label", "Chart of predictions by kind of message");
  board.chart.hidden = true;
  const table = el("table");
  table.id = "progress-table";
  const head = el("tr");
  head.append(el("th", "", "Name"));
  for (let s = 1; s <= STEPS; s++) {
    const th = el("th", "step", String(s));
    th.dataset.step = String(s);
    th.scope = "col";
    head.append(th);
  }
  for (const text of ["Time on step", "Stuck", "Predictions right", ...codeHeaders]) head.append(el("th", "", text));
  const thead = el("thead");
  thead.append(head);
  board.body = el("tbody");
  board.body.id = "progress-body";
  table.append(thead, board.body);
  // The table scrolls sideways on a phone: a region a keyboard can reach
  // and scroll, as the console's other tables are.
  const scroll = el("div", "scroll");
  scroll.tabIndex = 0;
  scroll.setAttribute("role", "region");
  scroll.setAttribute("aria-label", "Progress by student");
  scroll.append(table);
  // A class's console downloads its own class's grades (a class key may
  // not read the server's); the open lab's console, the server's.
  const scope = classScope();
  const grades = el("a", "", scope ? "Download this class's grades (CSV)" : "Download grades (CSV)");
  grades.href = scope ? `${classPath(scope)}/grades.csv` : "/api/grades.csv";
  grades.id = "grades-link";
  const gradesLine = el("p");
  gradesLine.append(grades);
  // The mastery grid: students × the ten kinds of message (practice,
  // docs/exercise.md), in words, with the class's count per kind below.
  const gHeading = el("h3", "", "Mastery by kind of message");
  gHeading.id = "mastery-grid-heading";
  board.grid = el("table", "mastery-grid");
  board.grid.id = "mastery-grid";
  board.grid.setAttribute("aria-labelledby", gHeading.id);
  const gScroll = el("div", "scroll");
  gScroll.tabIndex = 0;
  gScroll.setAttribute("role", "region");
  gScroll.setAttribute("aria-label", "Mastery by student and kind of message");
  gScroll.append(board.grid);
  section.replaceChildren(heading, board.distribution, codeSummaryBox(), mHeading, board.chart, board.misconceptions, board.misconceptionsEmpty, scroll, gHeading, gScroll, gradesLine);
  board.rows = new KeyedList(board.body, { make: makeRow, update: updateRow });

  // The steps' goals as the columns' titles.
  fetch("/exercise.json")
    .then((resp) => (resp.ok ? resp.json() : null))
    .then((data) => {
      for (const s of list(data?.steps)) {
        const th = head.querySelector(`th[data-step="${num(s.number)}"]`);
        if (th) th.title = `Step ${num(s.number)}: ${str(s.goal)}`;
      }
    })
    .catch(() => {});
  board.timer = setInterval(() => board.frame && draw(), REFRESH_MS);
}

// stopProgress stops the board's timer (the console has stopped).
export function stopProgress() {
  clearInterval(board.timer);
  cancelAnimationFrame(board.drawFrame);
  board.timer = 0;
  board.drawFrame = 0;
}

// renderProgress takes an overview frame; the board is drawn once per
// animation frame, however many frames arrive.
export function renderProgress(frame) {
  if (!board.section) return;
  board.frame = frame;
  const sum = frame?.exercise ?? {};
  const serverNow = Date.parse(str(sum.now));
  if (!Number.isNaN(serverNow)) board.offsetMs = Date.now() - serverNow;
  if (num(sum.stuckAfter) > 0) board.stuckAfterMs = num(sum.stuckAfter) * 1000;
  if (board.drawFrame) return;
  board.drawFrame = requestAnimationFrame(() => {
    board.drawFrame = 0;
    draw();
  });
}

function draw() {
  const frame = board.frame;
  const rows = list(frame?.sessions)
    .slice()
    .sort((a, b) => label(a).localeCompare(label(b)) || (str(a.id) < str(b.id) ? -1 : 1));
  board.rows.render(rows, (r) => str(r.id) || undefined);
  drawSummary(frame?.exercise ?? {});
  drawMastery(rows, list(frame?.exercise?.mastery));
  drawCodeSummary(rows);
}

// The grid's words for a kind's state (the row's mastery.kinds).
const MASTERY_WORDS = { mastered: "mastered", wrong: "last wrong", learning: "learning", new: "not met yet" };

// drawMastery draws the mastery grid: a row per student, a column per kind
// (the summary's, in the order the nine steps meet them), and the class's
// count of students who mastered each kind. Rebuilt only when it changes.
function drawMastery(rows, kinds) {
  const key = JSON.stringify([kinds.map((k) => [str(k.kind), num(k.mastered)]), rows.map((r) => [label(r), r.mastery ?? null])]);
  if (key === board.gridKey) return;
  board.gridKey = key;
  const head = el("tr");
  head.append(el("th", "", "Name"));
  for (const k of kinds) {
    const th = el("th", "kind", str(k.phrase));
    th.scope = "col";
    th.dataset.kind = str(k.kind);
    head.append(th);
  }
  head.append(el("th", "", "Mastered"));
  const thead = el("thead");
  thead.append(head);
  const tbody = el("tbody");
  for (const r of rows) {
    const tr = el("tr");
    tr.dataset.session = str(r.id);
    const name = el("th", "name", label(r));
    name.scope = "row";
    tr.append(name);
    const states = r.mastery?.kinds ?? {};
    for (const k of kinds) {
      const state = str(states[str(k.kind)]) || "new";
      const td = el("td", "mastery", MASTERY_WORDS[state] ?? state);
      td.dataset.state = state;
      tr.append(td);
    }
    tr.append(el("td", "", `${num(r.mastery?.mastered)} of ${kinds.length}`));
    tbody.append(tr);
  }
  const foot = el("tr");
  const total = el("th", "", "Class: mastered");
  total.scope = "row";
  foot.append(total);
  for (const k of kinds) foot.append(el("td", "count", `${num(k.mastered)} of ${rows.length}`));
  foot.append(el("td"));
  const tfoot = el("tfoot");
  tfoot.append(foot);
  board.grid.replaceChildren(thead, tbody, tfoot);
}

function drawSummary(sum) {
  const steps = sum.steps ?? {};
  const at = list(steps.at);
  const parts = [];
  for (let s = 1; s <= STEPS; s++) if (num(at[s]) > 0) parts.push(`step ${s}: ${num(at[s])}`);
  const finished = num(at[0]);
  let text = parts.length > 0 ? `Working on ${parts.join(", ")}` : "Nobody is working on a step";
  if (finished > 0) text += `; all nine done: ${finished}`;
  // Stuck as the rows show it now: the times move on between frames.
  const stuck = board.body.querySelectorAll('tr[data-stuck="true"]').length;
  if (stuck > 0) text += `; stuck: ${stuck}`;
  setText(board.distribution, `${text}.`);

  const items = list(sum.misconceptions);
  board.misconceptionsEmpty.hidden = items.length > 0;
  // Few lines, rebuilt whole: they have no focus to keep.
  const lines = items.map((m) => {
    const li = el("li");
    li.dataset.kind = str(m.kind);
    const said = list(m.said).map((s) => str(s.sentence));
    li.textContent = `${str(m.phrase)}: ${num(m.right)} of ${num(m.made)} predictions right. ${said.join("; ")}.`;
    return li;
  });
  const same =
    lines.length === board.misconceptions.children.length &&
    lines.every((li, i) => li.textContent === board.misconceptions.children[i].textContent);
  if (!same) board.misconceptions.replaceChildren(...lines);
  const key = JSON.stringify(items.map((m) => [str(m.kind), num(m.made), num(m.right)]));
  if (key !== board.chartKey) {
    board.chartKey = key;
    board.chart.hidden = items.length === 0;
    board.chart.replaceChildren(misconceptionChart(items));
  }
}

function makeRow(id) {
  const tr = el("tr");
  tr.dataset.session = id;
  const name = el("th", "name");
  name.scope = "row";
  tr.append(name);
  const steps = [];
  for (let s = 1; s <= STEPS; s++) {
    const td = el("td", "step");
    td.dataset.step = String(s);
    tr.append(td);
    steps.push(td);
  }
  const time = el("td", "time");
  const stuck = el("td", "stuck");
  const accuracy = el("td", "accuracy");
  const code = codeCells();
  tr.append(time, stuck, accuracy, ...code.tds);
  return { el: tr, name, steps, time, stuck, accuracy, code };
}

function updateRow(dom, row) {
  setText(dom.name, label(row));
  dom.name.title = str(row.id);
  const done = new Set(list(row.steps).map(Number));
  const current = num(row.current);
  dom.steps.forEach((td, i) => {
    const s = i + 1;
    const status = done.has(s) ? "done" : s === current ? "current" : "todo";
    setData(td, "status", status);
    setText(td, status === "done" ? "✓" : status === "current" ? "➜" : "·");
    const words = status === "done" ? "done" : status === "current" ? "current" : "not yet";
    td.setAttribute("aria-label", `step ${s}: ${words}`);
  });
  const since = Date.parse(str(row.currentSince));
  const elapsed = Number.isNaN(since) ? 0 : Math.max(0, Date.now() - board.offsetMs - since);
  // A student who has not acted yet is on no step's clock, and never stuck
  // (the server's progress.Started: an injection does not start a session).
  const started = row.started === true;
  const stuck = started && current !== 0 && elapsed >= board.stuckAfterMs;
  setText(dom.time, current === 0 ? "finished" : started ? duration(elapsed) : "not started");
  setText(dom.stuck, stuck ? "stuck" : "");
  setData(dom.el, "stuck", stuck ? "true" : "false");
  const p = row.predictions ?? {};
  setText(dom.accuracy, num(p.made) > 0 ? `${num(p.right)} of ${num(p.made)}` : "none yet");
  dom.code.update(row);
}

// duration is a time span as "4 min 05 s" or "45 s".
function duration(ms) {
  const total = Math.floor(ms / 1000);
  const m = Math.floor(total / 60);
  const s = total % 60;
  return m > 0 ? `${m} min ${String(s).padStart(2, "0")} s` : `${s} s`;
}
