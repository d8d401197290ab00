// The session diagram on the pages (docs/instructor.md, "Diagrams"): the
// student page's collapsible "Diagram" section, the console's watched
// session and the projector's debrief view all show the drawing the server
// makes (internal/diagramsvg), so there is one drawing code. The SVG is
// fetched as text, parsed with DOMParser as image/svg+xml, checked, and its
// nodes imported into the page: never innerHTML, and the CSP stays as it is.
// Every text in it is the server's, escaped there and kept text here.
//
// The console's misconception chart is drawn here too, as SVG nodes built
// with createElementNS and textContent, from the overview frame's numbers.
//
// Used by lab.js (diagramSection), instructor.js (DiagramView) and
// projector.js (DiagramView); progress.js (misconceptionChart).

import { el, list, num, str } from "./dom.js";

const SVG_NS = "http://www.w3.org/2000/svg";
// A burst of changes (a student clicking fast, a replay catching up) makes
// one request, this long after the last of them.
const DEBOUNCE_MS = 250;

// parseSVG returns the document element of svg text as a node of this
// document, or null if the text is not one well-formed <svg> element.
export function parseSVG(text) {
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (!root || root.namespaceURI !== SVG_NS || root.localName !== "svg") return null;
  if (doc.getElementsByTagNameNS("*", "parsererror").length > 0) return null;
  return document.importNode(root, true);
}

// DiagramView shows the drawing at an address in box, a container that
// scrolls sideways (the page's markup: tabindex=0, role=region and a
// label). changed(seq) says the session moved on: while the view is active
// it fetches the drawing again, debounced, one request in flight at a time
// (a change during a request fetches once more after it). status(text) is
// told what the view is doing, "" once a drawing is shown.
export class DiagramView {
  #box;
  #status;
  #url = "";
  #active = true;
  #timer = 0;
  #inFlight = false;
  #again = false;
  #seq = -1; // the last seq changed was told of
  #shownSeq = -2; // the seq the drawing shown was asked for at

  constructor(box, { status = () => {}, active = true } = {}) {
    this.#box = box;
    this.#status = status;
    this.#active = active;
  }

  // show draws url's session from now on (a new address clears the box).
  show(url) {
    if (url !== this.#url) {
      this.#url = url;
      this.#shownSeq = -2;
      this.#box.replaceChildren();
      this.#box.removeAttribute("data-seq");
    }
    this.refresh();
  }

  // changed says the session is at seq now.
  changed(seq) {
    if (seq === this.#seq) return;
    this.#seq = seq;
    if (this.#shownSeq !== seq) this.refresh();
  }

  // setActive starts (true) or stops fetching: a closed section asks for
  // nothing, and opening it fetches what it missed.
  setActive(on) {
    this.#active = on;
    if (on && this.#shownSeq !== this.#seq) this.refresh();
    if (!on) {
      clearTimeout(this.#timer);
      this.#timer = 0;
    }
  }

  // refresh fetches the drawing again soon.
  refresh() {
    if (!this.#url || !this.#active) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = 0;
      this.#load();
    }, DEBOUNCE_MS);
  }

  async #load() {
    if (this.#inFlight) {
      this.#again = true;
      return;
    }
    this.#inFlight = true;
    const url = this.#url;
    const seq = this.#seq;
    if (this.#box.childElementCount === 0) this.#status("Drawing the session…");
    try {
      const resp = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      const text = await resp.text();
      if (url !== this.#url) return;
      if (!resp.ok) {
        let why = "";
        try {
          why = str(JSON.parse(text)?.error);
        } catch {
          // not JSON: the status says enough
        }
        this.#status(why ? `The diagram could not be drawn: ${why}` : `The diagram could not be drawn (${resp.status}).`);
        return;
      }
      const svg = parseSVG(text);
      if (!svg) {
        this.#status("The diagram could not be read.");
        return;
      }
      this.#put(svg);
      this.#shownSeq = seq;
      this.#box.dataset.seq = String(seq);
      this.#status("");
    } catch {
      if (url === this.#url) this.#status("The diagram could not be loaded; it is tried again at the next change.");
    } finally {
      this.#inFlight = false;
      if (this.#again) {
        this.#again = false;
        this.refresh();
      }
    }
  }

  // #put replaces the drawing; a reader scrolled to the newest end stays
  // there as the drawing grows.
  #put(svg) {
    const box = this.#box;
    const atEnd = box.childElementCount > 0 && box.scrollLeft + box.clientWidth >= box.scrollWidth - 8;
    box.replaceChildren(svg);
    if (atEnd) box.scrollLeft = box.scrollWidth;
  }
}

// diagramSection builds the student page's collapsible "Diagram" section
// into section (an empty <section>) for the drawing at url, and returns its
// view, closed: the page calls changed(seq) with every state.
export function diagramSection(section, url) {
  const heading = el("h2", "diagram-heading");
  const button = el("button", "disclosure", "Diagram");
  button.type = "button";
  button.id = "diagram-toggle";
  button.setAttribute("aria-expanded", "false");
  button.setAttribute("aria-controls", "diagram-panel");
  heading.append(button);
  const panel = el("div", "diagram-panel");
  panel.id = "diagram-panel";
  panel.hidden = true;
  const hint = el(
    "p",
    "hint",
    "Your session as a picture: time runs left to right, the top row is your page (the client) and each run a row below it. Each line is a message, from the run it answers (the run a reply names, else the run it was queued in) to the moment you delivered it, marked with what it did.",
  );
  const box = el("div", "diagram-scroll");
  box.id = "diagram-box";
  box.tabIndex = 0;
  box.setAttribute("role", "region");
  box.setAttribute("aria-label", "Session diagram (scrolls sideways)");
  const status = el("p", "diagram-status");
  status.id = "diagram-status";
  status.setAttribute("role", "status");
  panel.append(hint, box, status);
  section.setAttribute("aria-labelledby", "diagram-toggle");
  section.replaceChildren(heading, panel);
  const view = new DiagramView(box, { status: (t) => (status.textContent = t), active: false });
  view.show(url);
  button.addEventListener("click", () => {
    const open = panel.hidden;
    panel.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    view.setActive(open);
  });
  return view;
}

// ---- the misconception chart --------------------------------------------------

const CHART = {
  label: 190, // the kinds' column
  bar: 260, // the longest bar
  row: 34,
  barH: 12,
  right: "#116329", // colours that pass 4.5:1 on white, told apart by their words too
  wrong: "#b3261e",
  ink: "#1f2328",
};

function svgEl(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// misconceptionChart draws the class's predictions by kind of message (the
// overview's misconceptions, in the server's order) as bars: per kind, the
// right predictions and the wrong ones, each with its number as text, all
// scaled to the kind with the most. It returns the <svg>, named and
// described for screen readers by each bar's sentence (the frame's text).
export function misconceptionChart(items, id = "misconception-chart") {
  const rows = list(items);
  const most = Math.max(1, ...rows.map((m) => num(m.made)));
  const width = CHART.label + CHART.bar + 120;
  const height = Math.max(1, rows.length) * CHART.row + 30;
  const svg = svgEl("svg", {
    role: "img",
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    "font-family": "system-ui, sans-serif",
    "font-size": 13,
    "aria-labelledby": `${id}-title ${id}-desc`,
  });
  svg.id = id;
  svg.append(svgEl("title", { id: `${id}-title` }, "Predictions by kind of message: right and wrong"));
  const words = rows.map((m) => str(m.text) || `${str(m.phrase)}: ${num(m.right)} right, ${num(m.made) - num(m.right)} wrong`);
  svg.append(svgEl("desc", { id: `${id}-desc` }, words.join(". ") + (words.length ? "." : "No predictions yet.")));
  // The key, in words and colour.
  svg.append(
    svgEl("rect", { x: CHART.label, y: 6, width: 12, height: 12, fill: CHART.right }),
    svgEl("text", { x: CHART.label + 16, y: 16, fill: CHART.ink }, "right"),
    svgEl("rect", { x: CHART.label + 70, y: 6, width: 12, height: 12, fill: CHART.wrong }),
    svgEl("text", { x: CHART.label + 86, y: 16, fill: CHART.ink }, "wrong"),
  );
  rows.forEach((m, i) => {
    const y = 30 + i * CHART.row;
    const right = num(m.right);
    const wrong = "wrong" in m ? num(m.wrong) : num(m.made) - right;
    const g = svgEl("g", { "data-kind": str(m.kind) });
    g.append(svgEl("title", {}, words[i]));
    g.append(svgEl("text", { x: 0, y: y + CHART.barH + 2, fill: CHART.ink }, str(m.phrase)));
    const rw = Math.round((right / most) * CHART.bar);
    const ww = Math.round((wrong / most) * CHART.bar);
    g.append(svgEl("rect", { x: CHART.label, y, width: rw, height: CHART.barH, fill: CHART.right }));
    g.append(svgEl("rect", { x: CHART.label + rw, y, width: ww, height: CHART.barH, fill: CHART.wrong }));
    g.append(
      svgEl("text", { x: CHART.label + rw + ww + 6, y: y + CHART.barH - 1, fill: CHART.ink, class: "bar-numbers" }, `${right} right, ${wrong} wrong`),
    );
    svg.append(g);
  });
  return svg;
}
