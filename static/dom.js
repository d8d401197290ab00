// Helpers shared by the student page (lab.js), the instructor console
// (instructor.js, classes.js), its login form (instructor-login.js) and the
// projector (projector.js). A plain ES module: the pages import it as is,
// there is no build step. The pages' one WebSocket (LiveSocket), their
// requests to the console's API (api) and the class a page is about
// (classScope) are here, once.
//
// Everything here writes text with textContent, never HTML, so server text is
// always shown literally.

export const byId = (id) => document.getElementById(id);

// Narrowing of values read from server frames: a missing or mistyped field
// renders as empty (or 0), never as "undefined".
export const str = (v) => (typeof v === "string" ? v : "");
export const num = (v) => (typeof v === "number" ? v : 0);
export const list = (v) => (Array.isArray(v) ? v : []);

// el makes an element of tag with an optional class and text (as text).
export function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

// setText sets node's text unless it already is text: writing equal text would
// still replace the text node, which makes screen readers re-announce live
// regions.
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

// ---- the console's API ------------------------------------------------------

// LOGIN_PAGE is the console's login form, where a page goes when its login
// has ended.
export const LOGIN_PAGE = "/instructor/login";

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

// APIError is a request to the lab's JSON API that did not succeed. status is
// the HTTP status, 0 when the request did not reach the server; error is the
// answer's {"error": …} sentence ("" when it has none); body is the decoded
// answer, undefined when it was not JSON (then unreadable is true). The
// message is what the pages show by default.
export class APIError extends Error {
  constructor(message, { status = 0, error = "", body = undefined, unreadable = false } = {}) {
    super(message);
    this.name = "APIError";
    this.status = status;
    this.error = error;
    this.body = body;
    this.unreadable = unreadable;
  }
}

// api sends a request to the lab's JSON API with the console's login cookie
// and resolves to the decoded answer; anything else rejects with an
// APIError. A 401 means the login has ended: loggedOut runs before the
// promise rejects.
export async function api(method, path, body) {
  let resp;
  try {
    resp = await requestJSON(method, path, body);
  } catch (err) {
    throw new APIError(String(err?.message ?? err));
  }
  if (resp.status === 401) loggedOut();
  let out;
  let unreadable = false;
  try {
    out = await resp.json();
  } catch {
    unreadable = true;
  }
  if (!resp.ok) {
    const error = str(out?.error);
    throw new APIError(error || `The server answered ${resp.status}.`, { status: resp.status, error, body: out, unreadable });
  }
  if (unreadable) {
    throw new APIError(`The server's answer could not be read (${resp.status}).`, { status: resp.status, unreadable });
  }
  return out ?? {};
}

// loginEnded says whether the API answers 401 at path (the login has ended);
// a server that is away has not ended the login.
export async function loginEnded(path) {
  try {
    return (await requestJSON("GET", path)).status === 401;
  } catch {
    return false;
  }
}

const onLoggedOut = [];
let loggingOut = false;

// whenLoggedOut adds fn to what the page stops when its login has ended (its
// socket, timers, requests), before it goes to the login form.
export function whenLoggedOut(fn) {
  onLoggedOut.push(fn);
}

// loggedOut is what a 401 from the console's API means: the page stops for
// good (whenLoggedOut) and goes to the login form. Only the first call acts;
// location.assign only starts a navigation, and the page keeps running until
// the login form has loaded.
export function loggedOut() {
  if (loggingOut) return;
  loggingOut = true;
  for (const fn of onLoggedOut) fn();
  // Back to this page (its class, watched session, projector) after the
  // login: the server takes next only when it is a console page.
  const next = location.pathname + location.search;
  location.assign(`${LOGIN_PAGE}?next=${encodeURIComponent(next)}`);
}

// ---- classes ----------------------------------------------------------------

// classScope is the class of a class's console or projector
// (/instructor/classes/{id}, …/{id}/projector), "" for any other path (the
// open lab's console at /instructor).
export function classScope(path = location.pathname) {
  const m = /^\/instructor\/classes\/([^/]+)(?:\/projector)?\/?$/.exec(path);
  if (!m) return "";
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return "";
  }
}

// classPath is the API address of class id.
export const classPath = (id) => `/api/classes/${encodeURIComponent(id)}`;

// ---- the live socket ----------------------------------------------------------

// LiveSocket is a page's one WebSocket to path on this server. It connects,
// hands each frame to the page decoded, and after a close connects again with
// backoff (Reconnect) until the page stops it. The page passes what it does
// at each point, all optional:
//
//   status(state)     the connection's state for the page's status line:
//                     "connecting", "connected", or "waiting" (closed; while
//                     a retry is pending it is said again every 250 ms, for a
//                     countdown to retryAt)
//   opened()          after the socket opened (what the page sends first)
//   frame(frame)      each frame, decoded from JSON
//   unreadable(data)  a frame that is not JSON
//   closed(event, opened)  after a close, before anything else; the page may
//                     call stop() here
//   beforeRetry()     awaited before each reconnection (failures ignored)
//   login             { probe, unopenedOnly, ended }: a WebSocket cannot say
//                     why it was refused, so after a close (only one that
//                     never opened, with unopenedOnly) the socket asks the API
//                     at probe; a 401 there stops it and calls ended()
//   succeedOnOpen     whether opening is enough for a connection to count as
//                     having done its job (resetting the backoff); default
//                     true, else the page calls succeeded()
export class LiveSocket {
  #path;
  #on;
  #retry;
  #ws = null;
  #tick = 0; // the status interval while a retry is pending
  #stopped = false;
  #succeeded = false; // the current connection did its job
  everConnected = false; // some connection of this page opened

  constructor(path, on = {}) {
    this.#path = path;
    this.#on = on;
    this.#retry = new Reconnect(async () => {
      if (on.beforeRetry) await Promise.resolve().then(on.beforeRetry).catch(() => {});
      this.connect();
    });
  }

  // connect opens a new connection now (dropping a pending retry), unless
  // the socket is stopped.
  connect() {
    if (this.#stopped) return;
    this.#stopRetry();
    this.#status("connecting");
    const ws = new WebSocket(socketURL(this.#path));
    this.#ws = ws;
    this.#succeeded = false;
    let opened = false;
    ws.addEventListener("open", () => {
      if (this.#ws !== ws) return;
      opened = true;
      this.everConnected = true;
      if (this.#on.succeedOnOpen !== false) this.#succeeded = true;
      this.#status("connected");
      this.#on.opened?.();
    });
    ws.addEventListener("message", (event) => {
      if (this.#ws !== ws) return;
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        this.#on.unreadable?.(event.data);
        return;
      }
      this.#on.frame?.(frame);
    });
    // An "error" event is always followed by "close", which handles it.
    ws.addEventListener("close", async (event) => {
      if (this.#ws !== ws) return;
      this.#ws = null;
      this.#on.closed?.(event, opened);
      if (this.#stopped) return;
      this.#status("waiting");
      const login = this.#on.login;
      if (login && !(opened && login.unopenedOnly) && (await loginEnded(login.probe))) {
        if (this.#stopped) return;
        this.stop();
        login.ended?.();
        return;
      }
      if (this.#stopped) return;
      this.#retry.schedule(this.#succeeded);
      this.#tick = setInterval(() => this.#status("waiting"), 250);
      this.#status("waiting");
    });
  }

  // succeeded says the current connection did its job (for a page whose
  // connection must deliver something, not only open).
  succeeded() {
    this.#succeeded = true;
  }

  // open says a connection is open to send on.
  get open() {
    return this.#ws !== null && this.#ws.readyState === WebSocket.OPEN;
  }

  // send sends text on the open connection; false when none is open.
  send(text) {
    if (this.#stopped || !this.open) return false;
    this.#ws.send(text);
    return true;
  }

  // retryAt is when the pending retry runs (Date.now() time), 0 if none.
  get retryAt() {
    return this.#retry.at;
  }

  // retryNow connects at once if a retry is pending (coming back online).
  retryNow() {
    if (this.#retry.pending) this.connect();
  }

  get stopped() {
    return this.#stopped;
  }

  // stop ends the socket for good: no connection, retry or timer outlives it.
  // An open connection is closed with code and reason.
  stop(code = 1000, reason = "") {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#stopRetry();
    const ws = this.#ws;
    this.#ws = null;
    ws?.close(code, reason);
  }

  #status(state) {
    this.#on.status?.(state);
  }

  #stopRetry() {
    this.#retry.cancel();
    clearInterval(this.#tick);
    this.#tick = 0;
  }
}
