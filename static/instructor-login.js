// Login form of the instructor console: the form posts by itself; this only
// says so when the last attempt failed.

import { byId } from "./dom.js";

if (new URLSearchParams(location.search).has("failed")) byId("failed").hidden = false;
byId("token").focus();
