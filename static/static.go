// Package static holds the pages of the lab. The files are embedded so
// that the server binary is self-contained and the page always matches the
// protocol version the server speaks; there is no build step.
package static

import "embed"

// Files holds the pages the server serves (lab.html at /lab/{id},
// instructor.html and instructor-login.html under /instructor, projector.html
// for a class, join.html the template of /join and /j/{code}), and the
// stylesheets and scripts they load from /static/<name>; dom.js is the module
// of helpers the scripts share, exercise.js the student's exercise panel,
// practice.js the student's practice and mastery of the ten kinds, and
// progress.js the console's progress board; code.js the student's "Write the client"
// panel and codeboard.js the console's code board, with the editor vendored
// under vendor/ (vendor/README.md says what and from where); codesteps.js
// the student's failure step by step and its branches, casesboard.js the
// console's case tools.
//
//go:embed lab.html lab.css lab.js dom.js exercise.js exercise.css practice.js progress.js diagram.js diagram.css instructor.html instructor-login.html instructor.css instructor.js instructor-login.js join.html join.css projector.html projector.css projector.js classes.js classtitle.js code.js code.css codeboard.js codesteps.js codesteps.css live.js casesboard.js casesboard.css ToolCall.res rescript-mode.js vendor
var Files embed.FS
