// Helpers shared by the student page (lab.js), the instructor console
// (instructor.js) and its login form (instructor-login.js). A plain ES module:
// the pages import it as is, there is no build step.
//
// Everything here writes text with textContent, never HTML, so server text is
// always shown literally.

export const byId = (id) => document.getElementById(id);

// Narrowing of values read from server frames: a missing or mistyped field
// renders as empty (or 0), never as "undefined".
export const str = (v) => (typeof v === "string" ? v : "");
export const num = (v) => (typeof v === "number" ? v : 0);
export const list = (v) => (Array.isArray(v) ? v : []);

// setText sets node's text unless it already is text: writing equal text would
// still replace the text node, which makes screen readers re-announce live
// regions.
// el makes an element of tag with an optional class and text (as text).
export function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

// requestJSON sends body as JSON (no body when undefined) with the page's
// cookies, and resolves to the response.
export function requestJSON(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return fetch(path, init);
}

export function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// setData sets one data-* attribute unless it already has that value.
export function setData(node, key, value) {
  if (node.dataset[key] !== value) node.dataset[key] = value;
}

// placeInOrder puts the elements of wanted in that order at the start of
// parent while moving as few as possible: a list that only grows never moves
// an existing element, so focus inside it is never lost.
export function placeInOrder(parent, wanted) {
  let cursor = parent.firstElementChild;
  for (const node of wanted) {
    if (node === cursor) cursor = cursor.nextElementSibling;
    else parent.insertBefore(node, cursor);
  }
}

// KeyedList renders a list of items into parent with one element per key,
// kept between renders: an item whose key stays keeps its element (and the
// focus inside it), a new key gets a new one, a key that is gone loses its.
//
// make(key, item) returns a row object with the element as row.el (and any
// parts update needs); update(row, item, key) brings it up to date.
export class KeyedList {
  #parent;
  #make;
  #update;
  #rows = new Map(); // key -> row

  constructor(parent, { make, update }) {
    this.#parent = parent;
    this.#make = make;
    this.#update = update;
  }

  // render shows items in their order; keyOf(item) gives an item's key, or
  // undefined to skip the item. A repeated key is shown once, at its first
  // place. It returns how many items are shown.
  render(items, keyOf) {
    const wanted = [];
    const keep = new Set();
    for (const item of items) {
      const key = keyOf(item);
      if (key === undefined || keep.has(key)) continue;
      keep.add(key);
      let row = this.#rows.get(key);
      if (!row) {
        row = this.#make(key, item);
        this.#rows.set(key, row);
      }
      this.#update(row, item, key);
      wanted.push(row.el);
    }
    for (const [key, row] of this.#rows) {
      if (!keep.has(key)) {
        row.el.remove();
        this.#rows.delete(key);
      }
    }
    placeInOrder(this.#parent, wanted);
    return wanted.length;
  }
}

// syncList makes parent hold one <li> per item, reusing the ones it has by
// position, and fills each with fill(li, item). For lists whose items have no
// identity worth keeping (receipts only grow or are cleared).
export function syncList(parent, items, fill) {
  items.forEach((item, i) => {
    let li = parent.children[i];
    if (!li) {
      li = document.createElement("li");
      parent.append(li);
    }
    fill(li, item);
  });
  while (parent.children.length > items.length) parent.lastElementChild.remove();
}

// socketURL is the WebSocket address of path on this page's server.
export function socketURL(path) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}

// Reconnect waits before connecting again: exponential backoff with full
// jitter (a uniform delay below min(cap, base·2^failures)), so that many tabs
// dropped by one server restart do not all come back in the same instant,
// and a server that accepts and drops at once is not hammered.
export class Reconnect {
  #connect;
  #baseMs;
  #capMs;
  #timer = 0;
  failures = 0; // connections in a row that ended without doing their job
  at = 0; // when the pending attempt runs (Date.now() time), 0 if none

  constructor(connect, { baseMs = 250, capMs = 10_000 } = {}) {
    this.#connect = connect;
    this.#baseMs = baseMs;
    this.#capMs = capMs;
  }

  // schedule arranges the next attempt after a connection ended; ok says it
  // did its job (it opened, or delivered a state), which resets the backoff.
  // It returns the delay in milliseconds.
  schedule(ok) {
    this.cancel();
    this.failures = ok ? 0 : this.failures + 1;
    const ceiling = Math.min(this.#capMs, this.#baseMs * 2 ** Math.min(this.failures, 16));
    const delay = Math.random() * ceiling;
    this.at = Date.now() + delay;
    this.#timer = setTimeout(() => {
      this.#timer = 0;
      this.at = 0;
      this.#connect();
    }, delay);
    return delay;
  }

  // pending says an attempt is scheduled.
  get pending() {
    return this.#timer !== 0;
  }

  // cancel drops the scheduled attempt, if any.
  cancel() {
    clearTimeout(this.#timer);
    this.#timer = 0;
    this.at = 0;
  }
}

// ConnectionIndicator shows the connection's state in a role="status" live
// region (the pages' #connection): data-state for the colour, and a text of
// main + countdown + end where the countdown is aria-hidden, so a screen
// reader hears "Reconnecting…" once, not every second as the number changes.
export class ConnectionIndicator {
  #el;
  #main = document.createTextNode("");
  #countdown = document.createElement("span");
  #end = document.createTextNode("");

  constructor(el) {
    this.#el = el;
    this.#countdown.setAttribute("aria-hidden", "true");
    el.replaceChildren(this.#main, this.#countdown, this.#end);
  }

  show(state, main, countdown = "", end = "") {
    setData(this.#el, "state", state);
    setText(this.#main, main);
    setText(this.#countdown, countdown);
    setText(this.#end, end);
  }
}

// localTime is an RFC 3339 time as this browser's local time of day, or ""
// when it is not a time.
export function localTime(v) {
  const when = new Date(str(v));
  return Number.isNaN(when.getTime()) ? "" : when.toLocaleTimeString();
}
