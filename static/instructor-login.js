// Login form of the instructor console: the form posts by itself; this only
// says so when the last attempt failed.
if (new URLSearchParams(location.search).has("failed")) {
  document.getElementById("failed").hidden = false;
}
document.getElementById("token").focus();
