// The class title on the student page: a session that joined a class shows
// which one (GET /lab/{id}/class answers {"class": {"title": …}}, or
// {"class": null} for an open-lab session).

const id = location.pathname.split("/")[2] || "";
const node = document.getElementById("class-title");

fetch(`/lab/${encodeURIComponent(id)}/class`, { credentials: "same-origin" })
  .then((resp) => (resp.ok ? resp.json() : null))
  .then((out) => {
    const title = out?.class?.title;
    if (node && typeof title === "string" && title) {
      node.textContent = `Class: ${title}`;
      node.hidden = false;
    }
  })
  .catch(() => {});
