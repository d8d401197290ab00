// Package static holds the student page of the lab. The files are embedded so
// that the server binary is self-contained and the page always matches the
// protocol version the server speaks; there is no build step.
package static

import "embed"

// Files holds lab.html, which the server serves at /lab/{id}, and the
// stylesheet and script it loads from /static/<name>.
//
//go:embed lab.html lab.css lab.js instructor.html instructor-login.html instructor.css instructor.js instructor-login.js join.html join.css projector.html projector.css projector.js classes.js classtitle.js
var Files embed.FS
