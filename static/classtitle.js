// The class title on the student page: a session that joined a class shows
// which one (GET /lab/{id}/class); an open-lab session shows nothing.

const id = location.pathname.split("/")[2] || "";
const node = document.getElementById("class-title");

fetch(`/lab/${encodeURIComponent(id)}/class`, { credentials: "same-origin" })
  .then((resp) => (resp.ok ? resp.json() : null))
  .then((out) => {
    const title = out?.class?.title;
    if (node && typeof title === "string" && title) {
      node.textContent = title;
      node.hidden = false;
    }
  })
  .catch(() => {});
