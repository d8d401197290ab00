// Classes in the instructor console. On /instructor: the list of classes
// (create, console, projector, close or reopen, a new key, delete after
// confirmation) above the open lab's table. On /instructor/classes/{id}:
// the class's heading, code and links. The table, the session view and
// injections are instructor.js's, scoped to the class by the same path.
// Server text goes through textContent only (dom.js).

import { api, byId, classPath, classScope, list as items, setText, str } from "./dom.js";

const scope = classScope();

// ---- the list (/instructor) -------------------------------------------------

const list = {
  section: byId("classes"),
  form: byId("class-form"),
  title: byId("class-title"),
  predictions: byId("class-new-predictions"),
  message: byId("class-message"),
  keyBox: byId("class-key-box"),
  keyTitle: byId("class-key-title"),
  key: byId("class-key"),
  empty: byId("classes-empty"),
  items: byId("class-list"),
};

function say(text) {
  setText(list.message, text);
}

function showKey(c) {
  setText(list.keyTitle, str(c.title));
  setText(list.key, str(c.key));
  list.keyBox.hidden = !c.key;
}

function link(text, href) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = text;
  return a;
}

// newTabLink opens in another tab, said in its text: the projector goes on
// the room's screen while the console stays in this tab.
function newTabLink(text, href) {
  const a = link(text, href);
  a.target = "_blank";
  a.rel = "noopener";
  return a;
}

function button(text, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = cls;
  b.textContent = text;
  b.addEventListener("click", onClick);
  return b;
}

function classItem(c) {
  const li = document.createElement("li");
  li.dataset.class = String(c.id);
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = String(c.title || "");
  const code = document.createElement("span");
  code.className = "code";
  code.textContent = `code ${c.code}`;
  const state = document.createElement("span");
  state.className = c.open ? "open" : "closed";
  state.textContent = c.open ? "open" : "closed";
  if (c.predictionsRequired) state.textContent += " · predictions required";
  const consolePath = `/instructor/classes/${encodeURIComponent(c.id)}`;
  li.append(
    title,
    code,
    state,
    link("Console", consolePath),
    newTabLink("Projector (new tab)", `${consolePath}/projector`),
    button(c.open ? "Close" : "Reopen", c.open ? "close" : "reopen", () =>
      act(() => api("POST", `${classPath(c.id)}/${c.open ? "close" : "reopen"}`), c.open ? `Closed ${c.title}.` : `Reopened ${c.title}.`),
    ),
    button("New key", "rotate", () => {
      if (!confirm(`Give ${c.title} a new class key? Whoever logged in with the old one is logged out.`)) return;
      act(async () => showKey((await api("POST", `${classPath(c.id)}/key`)).class), `${c.title} has a new key.`);
    }),
    button("Delete…", "delete", () => {
      if (!confirm(`Delete ${c.title} with all its students' sessions? This cannot be undone.`)) return;
      act(() => api("DELETE", classPath(c.id)), `Deleted ${c.title}.`);
    }),
  );
  return li;
}

async function act(fn, done) {
  try {
    await fn();
    say(done);
  } catch (e) {
    say(e.message);
  }
  await loadList();
}

async function loadList() {
  try {
    const out = await api("GET", "/api/classes");
    const classes = items(out.classes);
    list.items.replaceChildren(...classes.map(classItem));
    list.empty.hidden = classes.length > 0;
  } catch (e) {
    say(e.message);
  }
}

list.form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const title = list.title.value.trim();
  if (!title) return;
  try {
    const out = await api("POST", "/api/classes", { title, predictionsRequired: list.predictions.checked });
    showKey(out.class);
    list.title.value = "";
    list.predictions.checked = false;
    say(`Created ${out.class.title}: join code ${out.class.code}.`);
  } catch (err) {
    say(err.message);
  }
  await loadList();
});

// ---- one class (/instructor/classes/{id}) -----------------------------------

async function loadHead() {
  const head = byId("class-head");
  head.hidden = false;
  byId("overview-heading").textContent = "Students";
  try {
    const c = (await api("GET", classPath(scope))).class;
    byId("class-head-title").textContent = String(c.title || "");
    byId("class-head-code").textContent = String(c.code || "");
    byId("class-head-state").textContent = c.open ? "open" : "closed: nobody new can join";
    document.title = `${c.title} · Instructor console · Tool-call outcomes lab`;
    const box = byId("class-predictions");
    box.checked = c.predictionsRequired === true;
    box.disabled = false;
  } catch (e) {
    byId("class-head-title").textContent = e.message;
  }
  const base = `/instructor/classes/${encodeURIComponent(scope)}`;
  byId("class-head-projector").href = `${base}/projector`;
  byId("class-head-export").href = `${classPath(scope)}/export.csv`;
  // The overview's export is the class's too: a class key may not read the
  // server's /api/export.csv.
  const all = byId("export-csv");
  all.href = `${classPath(scope)}/export.csv`;
  all.textContent = "Export this class's sessions (CSV)";
}

// The "Predictions required" box changes the class setting; the server
// tells every student's page at once.
byId("class-predictions")?.addEventListener("change", async (e) => {
  const box = e.target;
  const want = box.checked;
  box.disabled = true;
  const message = byId("class-settings-message");
  try {
    const c = (await api("POST", `${classPath(scope)}/settings`, { predictionsRequired: want })).class;
    box.checked = c.predictionsRequired === true;
    setText(message, box.checked ? "Predictions are now required of every student." : "Predictions are optional again.");
  } catch (err) {
    box.checked = !want;
    setText(message, err.message);
  }
  box.disabled = false;
});

if (scope) {
  loadHead();
} else {
  list.section.hidden = false;
  byId("overview-heading").textContent = "Open lab sessions";
  loadList();
}

const all = document.querySelector('#target option[value="all"]');
if (all) all.textContent = scope ? "Every session of this class" : "Every open-lab session";
