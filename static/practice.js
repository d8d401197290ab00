// The student's practice (docs/exercise.md, "Practice"): a "Practise what
// I got wrong" button that asks the lab for the next kind of message (the
// server draws it from the student's own predictions and code check, sets
// the call up and holds one message of that kind), a prediction asked for
// before its Deliver button is enabled, why it was drawn and what the
// delivery showed, and a row of the ten kinds saying in words which are
// mastered.
//
// lab.js calls initPractice once with its send function, renderPractice
// with every state, and practicePending when a delivery is refused for want
// of a prediction. All text goes through textContent.

import { byId, el, list, num, setData, setText, str } from "./dom.js";

// The four predictions, as the exercise panel words them.
const WORDS = [
  ["accepted", "Accepted"],
  ["ignored", "Ignored"],
  ["unresolved", "Unresolved"],
  ["diagnostic", "Invalid (a diagnostic)"],
];

// The kinds, in the order the state frame lists them, as a student reads them.
const KIND_NAMES = {
  matchingReply: "Matching reply",
  staleReply: "Stale reply",
  duplicate: "Duplicate",
  contradictory: "Contradictory reply",
  deadline: "Deadline",
  lateReply: "Late reply",
  staleDeadline: "Older run's deadline",
  wrongCallId: "Wrong call id",
  malformedJson: "Malformed JSON",
  wrongShape: "Wrong shape",
};

const ui = {
  section: null,
  intro: null,
  draw: null, // the "Practise what I got wrong" button
  drawn: null, // the practice drawn: why, the prediction, Deliver
  why: null,
  ask: null,
  choice: null,
  deliver: null,
  result: null, // what the last practice's delivery showed
  done: null,
  summary: null,
  kinds: null, // the row of ten kinds
  items: {}, // kind → { li, state }
};

let sendFrame = () => false;
let pending = 0; // the practice message drawn and not delivered, 0 for none
let asked = false; // this tab asked for a practice and its state has not come

// initPractice builds the practice section after the exercise panel.
export function initPractice(send) {
  sendFrame = send;
  const after = byId("exercise");
  if (!after) return;
  const section = el("section", "practice");
  section.id = "practice";
  section.setAttribute("aria-labelledby", "practice-heading");
  const heading = el("h2", "practice-heading", "Practice");
  heading.id = "practice-heading";
  ui.intro = el(
    "p",
    "meta",
    "The lab picks the kind of message you last got wrong (or have not met yet), sets the call up for it and holds one for you. Three right predictions in a row master a kind.",
  );
  ui.intro.id = "practice-intro";
  ui.draw = el("button", "practice-draw", "Practise what I got wrong");
  ui.draw.type = "button";
  ui.draw.id = "practice-draw";
  ui.draw.addEventListener("click", () => {
    if (sendFrame({ type: "practice" }, ui.draw.textContent)) {
      asked = true;
      ui.draw.disabled = true;
    }
  });

  ui.drawn = el("div", "practice-drawn");
  ui.drawn.id = "practice-drawn";
  ui.drawn.hidden = true;
  ui.why = el("p", "practice-why");
  ui.why.id = "practice-why";
  ui.choice = el("fieldset", "predict practice-predict");
  ui.choice.id = "practice-predict";
  ui.ask = el("legend", "", "");
  ui.choice.append(ui.ask);
  for (const [word, text] of WORDS) {
    const label = el("label");
    const input = document.createElement("input");
    input.type = "radio";
    input.name = "practice-predict";
    input.value = word;
    input.id = `practice-predict-${word}`;
    input.required = true;
    input.addEventListener("change", () => (ui.deliver.disabled = !chosen()));
    label.append(input, ` ${text}`);
    ui.choice.append(label);
  }
  ui.deliver = el("button", "practice-deliver", "Deliver");
  ui.deliver.type = "button";
  ui.deliver.id = "practice-deliver";
  ui.deliver.disabled = true;
  ui.deliver.setAttribute("aria-describedby", "practice-why");
  ui.deliver.addEventListener("click", () => {
    const predict = chosen();
    if (!pending || !predict) return;
    if (sendFrame({ type: "deliver", message: pending, predict }, ui.deliver.textContent)) ui.deliver.disabled = true;
  });
  ui.drawn.append(ui.why, ui.choice, ui.deliver);

  ui.result = el("p", "practice-result");
  ui.result.id = "practice-result";
  ui.result.setAttribute("role", "status");
  ui.done = el("p", "finished practice-done", "All ten kinds mastered: three right predictions in a row each. Well done!");
  ui.done.id = "practice-done";
  ui.done.hidden = true;

  ui.summary = el("h3", "practice-summary", "Kinds of message");
  ui.summary.id = "mastery-heading";
  ui.kinds = el("ul", "mastery");
  ui.kinds.id = "mastery";
  ui.kinds.setAttribute("aria-labelledby", "mastery-heading");
  for (const [kind, name] of Object.entries(KIND_NAMES)) {
    const li = el("li", "kind");
    li.dataset.kind = kind;
    const state = el("span", "kind-state", "not met yet");
    li.append(el("span", "kind-name", name), state);
    ui.kinds.append(li);
    ui.items[kind] = { li, state };
  }
  section.append(heading, ui.intro, ui.done, ui.draw, ui.drawn, ui.result, ui.summary, ui.kinds);
  after.after(section);
  ui.section = section;
}

function chosen() {
  return ui.choice?.querySelector('input[name="practice-predict"]:checked')?.value ?? "";
}

// practicePending says whether a practice is held, waiting for its
// prediction: a delivery refused with prediction_required is then this one.
export function practicePending() {
  return pending !== 0;
}

// renderPractice shows a state frame's mastery and practice.
export function renderPractice(state) {
  if (!ui.section) return;
  const mastery = state?.mastery ?? {};
  let mastered = 0;
  for (const [kind, item] of Object.entries(ui.items)) {
    const m = mastery[kind] ?? {};
    const streak = num(m.streak);
    let word = "not met yet";
    let key = "new";
    if (m.mastered === true) {
      word = "mastered ✓";
      key = "mastered";
      mastered++;
    } else if (num(m.predicted) > 0 && streak === 0) {
      word = "last one wrong";
      key = "wrong";
    } else if (num(m.predicted) > 0) {
      word = `${streak} of 3 right in a row`;
      key = "learning";
    }
    setText(item.state, word);
    setData(item.li, "state", key);
  }
  setText(ui.summary, `Kinds of message: ${mastered} of 10 mastered`);

  const p = state?.practice ?? null;
  const message = num(p?.message);
  if (message !== pending) {
    // A new practice (or none): ask afresh.
    for (const input of ui.choice.querySelectorAll("input")) input.checked = false;
    ui.deliver.disabled = true;
  }
  const delivered = pending && !message ? pending : 0;
  pending = message;
  asked = asked && !message && !(p?.done === true);

  const allDone = p?.done === true;
  ui.done.hidden = !allDone;
  ui.draw.hidden = allDone;
  ui.draw.disabled = pending !== 0 || asked;
  ui.drawn.hidden = pending === 0;
  setData(ui.drawn, "kind", pending ? str(p.kind) : "");
  if (pending) {
    const number = str(p.number) || String(message);
    setText(ui.why, `Why this one: ${str(p.why)}`);
    setText(ui.ask, `Message ${number} is held for you. What do you expect the notice to be?`);
    setText(ui.deliver, `Deliver message ${number}`);
  }
  if (delivered) {
    const r = [...list(state?.receipts)].reverse().find((x) => num(x?.message) === delivered && x?.practice === true);
    if (r) {
      const verdict = r.right ? "you were right" : "not this time";
      setText(
        ui.result,
        `Message ${str(r.number)}: ${str(r.notice)} You predicted ${str(r.predicted)}: ${verdict}. Why: ${str(r.why)}`,
      );
      setData(ui.result, "right", r.right ? "true" : "false");
    }
  }
  setText(
    ui.intro,
    state?.exercise?.current === 0
      ? "All nine steps done: now practise what you got wrong. The lab picks the kind of message you last got wrong (or have not met yet), sets the call up for it and holds one for you. Three right predictions in a row master a kind."
      : "Practise at any time: the lab picks the kind of message you last got wrong (or have not met yet), sets the call up for it and holds one for you. Three right predictions in a row master a kind.",
  );
}

// practiceRefused re-enables the draw after a refusal of this tab's frame.
export function practiceRefused() {
  asked = false;
  if (ui.draw) ui.draw.disabled = pending !== 0;
  if (ui.deliver) ui.deliver.disabled = !pending || !chosen();
}
