// The class title on the student page: a session that joined a class shows
// which one (GET /lab/{id}/class answers {"class": {"title": …}}, or
// {"class": null} for an open-lab session).

import { byId, str } from "./dom.js";

const id = location.pathname.split("/")[2] || "";
const node = byId("class-title");

fetch(`/lab/${encodeURIComponent(id)}/class`, { credentials: "same-origin" })
  .then((resp) => (resp.ok ? resp.json() : null))
  .then((out) => {
    const title = str(out?.class?.title);
    if (node && title) {
      node.textContent = `Class: ${title}`;
      node.hidden = false;
    }
  })
  .catch(() => {});
