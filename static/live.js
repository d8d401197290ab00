// The compiler while the student types (issue 52; docs/protocol.md, "Live
// diagnostics"): at each pause in typing the editor's text goes to the lab
// as a compile frame, and what the compiler says comes back as a compiled
// frame, which code.js marks as it marks Check's messages. Resting the
// pointer on a name, or pressing Ctrl+I with the cursor on it, asks its
// type (a typeAt frame) and shows it in a tooltip. None of it is a
// submission: Check stays what the lab checks and counts.
//
// Only this page's newest ask is shown: an answer to an older one (the
// lab may drop a waiting ask for a newer one) is ignored. Everything is
// written with textContent.

const PAUSE_MS = 300; // after the last key
const REST_MS = 400; // the pointer resting on a name
const MAX_SOURCE_BYTES = 64 * 1024;

const live = {
  editor: null,
  send: null, // (frame) => bool, quiet: nothing is said when not sent
  lang: () => "javascript",
  types: () => false, // the lab answers typeAt (GET /code.json)
  show: null, // (diagnostics, language, error) => void, code.js
  say: null, // (text) => void: a quiet note under the editor
  seq: 0, // the last id asked
  compileId: 0, // the compile whose answer is awaited
  compileLang: "",
  typeId: 0, // the typeAt whose answer is awaited
  typeAt: null, // its place in the editor ({line, ch})
  timer: 0,
  restTimer: 0,
  tip: null,
};

// startLive follows editor's changes and pointer. opts: send, lang,
// types, show, say (see live above).
export function startLive(editor, opts) {
  Object.assign(live, opts);
  live.editor = editor;
  live.tip = document.createElement("div");
  live.tip.className = "code-type-tip";
  live.tip.id = "code-type-tip";
  live.tip.setAttribute("role", "tooltip");
  live.tip.setAttribute("aria-live", "polite");
  live.tip.hidden = true;
  editor.getWrapperElement().append(live.tip);
  editor.getInputField().setAttribute("aria-describedby", `${editor.getInputField().getAttribute("aria-describedby") ?? ""} code-type-tip`.trim());
  editor.on("changes", compileSoon);
  editor.on("cursorActivity", hideTip);
  editor.addKeyMap({ "Ctrl-I": askAtCursor, "Cmd-I": askAtCursor });
  const wrapper = editor.getWrapperElement();
  wrapper.addEventListener("mousemove", (event) => {
    clearTimeout(live.restTimer);
    const at = { left: event.clientX, top: event.clientY };
    live.restTimer = setTimeout(() => askAt(editor.coordsChar(at, "window")), REST_MS);
  });
  wrapper.addEventListener("mouseleave", () => {
    clearTimeout(live.restTimer);
    hideTip();
  });
  compileSoon();
}

// compileSoon compiles the editor's text once typing pauses.
export function compileSoon() {
  clearTimeout(live.timer);
  hideTip();
  if (!live.editor) return;
  live.timer = setTimeout(compileNow, PAUSE_MS);
}

function compileNow() {
  const source = live.editor.getValue();
  if (new TextEncoder().encode(source).length > MAX_SOURCE_BYTES) return; // Check says why
  const id = ++live.seq;
  const language = live.lang();
  if (live.send({ type: "compile", id, language, source })) {
    live.compileId = id;
    live.compileLang = language;
  }
}

function askAtCursor(cm) {
  askAt(cm.getCursor(), true);
}

// askAt asks the type of the name at pos, when there is a name there.
function askAt(pos, byKey = false) {
  const editor = live.editor;
  if (!editor || !live.types() || live.lang() !== "rescript") {
    if (byKey) showTip(pos, "No types here: they are shown for ReScript.");
    return;
  }
  const word = editor.findWordAt(pos);
  const text = editor.getRange(word.anchor, word.head);
  if (!/^[A-Za-z_][A-Za-z0-9_']*$/.test(text)) {
    if (byKey) showTip(pos, "No name at the cursor.");
    else hideTip();
    return;
  }
  const id = ++live.seq;
  // The name's first character: the pointer may rest past its last.
  const frame = { type: "typeAt", id, language: "rescript", source: editor.getValue(), line: word.anchor.line + 1, column: word.anchor.ch + 1 };
  if (live.send(frame)) {
    live.typeId = id;
    live.typeAt = { line: word.anchor.line, ch: word.anchor.ch, name: text, byKey };
  }
}

// liveAnswer takes a compiled, typeAt or error frame with an id.
export function liveAnswer(frame) {
  const id = typeof frame?.id === "number" ? frame.id : -1;
  if (frame.type === "compiled" && id === live.compileId) {
    const diagnostics = Array.isArray(frame.diagnostics) ? frame.diagnostics : [];
    live.show?.(diagnostics, live.compileLang, typeof frame.error === "string" ? frame.error : "");
  } else if (frame.type === "typeAt" && id === live.typeId && live.typeAt) {
    const text = typeof frame.text === "string" ? frame.text : "";
    const at = live.typeAt;
    if (text) showTip(at, `${at.name}: ${text}`);
    else if (at.byKey) showTip(at, `${at.name}: no type here.`);
    else hideTip();
  } else if (frame.type === "error" && (id === live.compileId || id === live.typeId)) {
    live.say?.(`The compiler is not answering as you type just now: ${typeof frame.error === "string" ? frame.error : ""}`);
  }
}

function showTip(pos, text) {
  const editor = live.editor;
  if (!editor || !live.tip) return;
  live.tip.textContent = text;
  const box = editor.getWrapperElement().getBoundingClientRect();
  const at = editor.charCoords({ line: pos.line, ch: pos.ch }, "window");
  live.tip.style.left = `${Math.max(0, at.left - box.left)}px`;
  live.tip.style.top = `${at.bottom - box.top + 2}px`;
  live.tip.hidden = false;
}

function hideTip() {
  if (live.tip) live.tip.hidden = true;
}
