// Login form of the instructor console: the form posts by itself; this only
// says so when the last attempt failed, and carries the page that sent the
// browser here (?next=…) so that the login returns to it. The server checks
// next is a console page (auth.go consolePath); this only passes it on.

import { byId } from "./dom.js";

const q = new URLSearchParams(location.search);
if (q.has("failed")) byId("failed").hidden = false;
byId("next").value = q.get("next") ?? "";
byId("token").focus();
