// The exercise panel of the student page: the seed's nine steps as
// checkpoints, ticked from the state frame's "exercise" (the server decides;
// docs/exercise.md has the rules), the choice of a prediction to send with
// the next delivery, and each receipt's explanation.
//
// lab.js calls initExercise once, renderExercise with every state,
// predictionMissing, chosenPrediction and clearPrediction when it sends a
// delivery and fillReceipt for each receipt.
// The steps' texts come from /exercise.json (the model's words, one place).
// All text goes through textContent.

import { byId, el, list, num, setData, setText, str } from "./dom.js";

const PREDICTIONS = [
  ["", "No prediction"],
  ["accepted", "Accepted"],
  ["ignored", "Ignored"],
  ["unresolved", "Unresolved"],
  ["diagnostic", "Invalid (a diagnostic)"],
];

const panel = {
  section: null, // #exercise
  summary: null, // the heading's words: "Exercise: 3 of 9 steps done"
  toggle: null, // the heading's button, which shows or hides the body
  toggleWord: null, // its visible "Hide ▴" / "Show ▾"
  body: null, // what the button shows or hides
  now: null, // #step-now in the sticky bar: the current step's task
  steps: [], // per step: { li, mark, hint, parts: [li…] }
  finished: null,
  accuracy: null,
  last: null, // the last state's exercise, to render once the texts arrive
  lastPredictions: null,
  choice: null, // the prediction fieldset
  legend: null, // its legend, which says whether a prediction is required
  required: false, // the class requires a prediction before each delivery
};

const LEGEND = "Before you deliver: what do you expect the notice to be?";
const LEGEND_REQUIRED = "Required by your class: before you deliver, what do you expect the notice to be?";

// initExercise builds the panel into section #exercise and the prediction
// choice just before the held messages (#queue).
export function initExercise() {
  const section = byId("exercise");
  if (!section) return;
  panel.section = section;
  panel.now = byId("step-now");
  // A heading with a disclosure button (not <details>), so that the control
  // says in words and with a chevron that it folds the panel.
  const heading = el("h2", "exercise-heading");
  panel.toggle = el("button", "exercise-toggle");
  panel.toggle.type = "button";
  panel.toggle.id = "exercise-toggle";
  panel.toggle.setAttribute("aria-expanded", "true");
  panel.toggle.setAttribute("aria-controls", "exercise-body");
  panel.summary = el("span", "", "Exercise: the nine steps");
  panel.summary.id = "exercise-summary";
  panel.toggleWord = el("span", "toggle-word", "Hide ▴");
  panel.toggleWord.setAttribute("aria-hidden", "true");
  panel.toggle.append(panel.summary, panel.toggleWord);
  heading.append(panel.toggle);
  panel.body = el("div", "exercise-body");
  panel.body.id = "exercise-body";
  panel.toggle.addEventListener("click", () => setOpen(panel.body.hidden));
  const intro = el(
    "p",
    "meta",
    "Each step ticks by itself when you have done what it teaches, in any run and any order. You can close this panel and use the lab freely.",
  );
  const steps = el("ol", "steps");
  steps.id = "exercise-steps";
  panel.finished = el("p", "finished", "All nine steps done. Well done!");
  panel.finished.id = "exercise-finished";
  panel.finished.hidden = true;
  panel.accuracy = el("p", "meta");
  panel.accuracy.id = "prediction-accuracy";
  panel.body.append(intro, steps, panel.finished, panel.accuracy);
  section.replaceChildren(heading, panel.body);
  section.hidden = false;

  const queue = byId("queue");
  if (queue) {
    const fieldset = el("fieldset", "predict");
    fieldset.id = "predict";
    panel.legend = el("legend", "", LEGEND);
    fieldset.append(panel.legend);
    for (const [word, text] of PREDICTIONS) {
      const label = el("label");
      const input = document.createElement("input");
      input.type = "radio";
      input.name = "predict";
      input.value = word;
      input.id = `predict-${word || "none"}`;
      input.checked = word === "";
      label.append(input, ` ${text}`);
      fieldset.append(label);
    }
    // Before the queue's heading, so that it reads before the Deliver buttons.
    const heading = byId("queue-heading");
    (heading && heading.parentNode === queue.parentNode ? heading : queue).before(fieldset);
    panel.choice = fieldset;
  }

  fetch("/exercise.json")
    .then((resp) => (resp.ok ? resp.json() : Promise.reject(new Error(String(resp.status)))))
    .then((data) => {
      buildSteps(steps, list(data?.steps));
      if (panel.last) renderExercise({ exercise: panel.last, predictions: panel.lastPredictions });
    })
    .catch(() => {
      steps.append(el("li", "", "The steps could not be loaded; reload the page to try again."));
    });
}

function setOpen(open) {
  panel.body.hidden = !open;
  panel.toggle.setAttribute("aria-expanded", String(open));
  setText(panel.toggleWord, open ? "Hide ▴" : "Show ▾");
}

function buildSteps(ol, steps) {
  panel.steps = steps.map((s) => {
    const li = el("li", "step");
    li.dataset.step = String(num(s.number));
    const mark = el("span", "mark", "");
    mark.setAttribute("aria-hidden", "true");
    const goal = el("span", "goal", str(s.goal));
    const state = el("span", "visually-hidden", "");
    const hint = el("p", "hint", `Try: ${str(s.hint)}`);
    hint.hidden = true;
    const partsList = el("ul", "parts");
    const parts = list(s.parts).map((p) => {
      const pli = el("li", "", str(p));
      partsList.append(pli);
      return pli;
    });
    partsList.hidden = parts.length === 0;
    li.append(mark, goal, state, hint, partsList);
    ol.append(li);
    return { li, mark, state, hint, hintText: str(s.hint), parts };
  });
}

// renderExercise shows a state frame's progress.
export function renderExercise(state) {
  const x = state?.exercise;
  if (!panel.section || !x) return;
  panel.last = x;
  panel.lastPredictions = state.predictions;
  const done = new Set(list(x.done).map(Number));
  const current = num(x.current);
  const parts = list(x.parts);
  setText(panel.summary, current === 0 ? "Exercise: all nine steps done" : `Exercise: ${done.size} of 9 steps done, now step ${current}`);
  panel.steps.forEach((s, i) => {
    const n = i + 1;
    const status = done.has(n) ? "done" : n === current ? "current" : "todo";
    setData(s.li, "status", status);
    setText(s.mark, status === "done" ? "✓" : status === "current" ? "➜" : "");
    setText(s.state, status === "done" ? " (done)" : status === "current" ? " (current step)" : "");
    if (status === "current") s.li.setAttribute("aria-current", "step");
    else s.li.removeAttribute("aria-current");
    s.hint.hidden = status !== "current";
    const seen = list(parts[i]);
    s.parts.forEach((p, j) => setData(p, "done", seen[j] === true ? "true" : "false"));
  });
  panel.finished.hidden = current !== 0;
  renderNow(current, done.size);
  setRequired(x.predictionsRequired === true);
  const p = state.predictions ?? {};
  setText(
    panel.accuracy,
    num(p.made) > 0 ? `Your predictions: ${num(p.right)} of ${num(p.made)} right.` : "Predict before you deliver to check your understanding.",
  );
}

// renderNow puts the current step's task in the sticky bar, so that it is in
// view wherever the student types the reply or delivers.
function renderNow(current, doneCount) {
  const now = panel.now;
  if (!now) return;
  now.hidden = false;
  const hint = panel.steps[current - 1]?.hintText ?? "";
  const head = current === 0 ? "All nine steps done." : `Step ${current} of 9${hint ? ":" : ""}`;
  const tail = current !== 0 && hint ? ` ${hint}` : "";
  if (now.textContent === head + tail) return;
  now.replaceChildren(el("span", "step-number", head), tail);
  now.dataset.step = String(current);
  now.dataset.done = String(doneCount);
}

// setRequired marks the prediction choice as required (the class setting,
// docs/classes.md): "No prediction" goes away, and nothing is chosen until
// the student chooses.
function setRequired(on) {
  if (!panel.choice || panel.required === on) return;
  panel.required = on;
  setData(panel.choice, "required", on ? "true" : "false");
  setText(panel.legend, on ? LEGEND_REQUIRED : LEGEND);
  const none = panel.choice.querySelector("#predict-none");
  if (none) {
    none.closest("label").hidden = on;
    if (on) none.checked = false;
    else if (!chosenPrediction()) none.checked = true;
  }
  for (const input of panel.choice.querySelectorAll('input[name="predict"]')) input.required = on;
}

// predictionMissing says whether the class requires a prediction and none
// is chosen; it then moves focus to the choice, so the student sees why.
export function predictionMissing() {
  if (!panel.required || chosenPrediction()) return false;
  panel.choice.querySelector('input[name="predict"]:not(#predict-none)')?.focus();
  return true;
}

// chosenPrediction returns the chosen prediction word, "" for none.
export function chosenPrediction() {
  const chosen = panel.choice?.querySelector('input[name="predict"]:checked');
  return chosen ? chosen.value : "";
}

// clearPrediction resets the choice once a delivery has gone out, so that
// each delivery is predicted afresh.
export function clearPrediction() {
  const none = panel.choice?.querySelector("#predict-none");
  if (!none) return;
  if (panel.required) {
    const chosen = panel.choice.querySelector('input[name="predict"]:checked');
    if (chosen) chosen.checked = false;
  } else {
    none.checked = true;
  }
}

// fillReceipt renders one receipt into li: the seed's line (kept verbatim
// in .receipt-notice), then why, who sent the message, and the prediction.
export function fillReceipt(li, receipt) {
  let main = li.querySelector(".receipt-notice");
  if (!main) {
    li.replaceChildren();
    main = el("span", "receipt-notice");
    li.append(main, el("span", "why"), el("span", "prediction"));
  }
  const [, why, prediction] = li.children;
  const number = str(receipt?.number) || String(num(receipt?.message) || "?");
  setText(main, `Delivered message ${number}: ${str(receipt?.notice)}`);
  const from = receipt?.from === "instructor" ? " (a message from your instructor)" : "";
  setText(why, str(receipt?.why) ? `Why: ${str(receipt.why)}${from}` : from);
  if (receipt?.predicted) {
    setText(prediction, `You predicted ${str(receipt.predicted)}: ${receipt.right ? "right" : "not this time"}.`);
    setData(prediction, "right", receipt.right ? "true" : "false");
  } else {
    setText(prediction, "");
  }
}
