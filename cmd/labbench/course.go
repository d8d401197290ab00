package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The course scenario is a large course on one node (issue 35): many
// sessions of two tabs, an op per session about every second, an
// instructor watching the class. 2,000 sessions × 2 tabs is 4,000
// WebSockets and 2,000 sessions from the bench's one address, at the
// per-address caps' defaults (-max-addr-conns, -max-addr-sessions 2,000),
// so the lab runs it with those raised (courseLabFlags), as a course
// behind one NAT would have to (docs/limits.md); -lab-flags still win.
const (
	courseTabs     = 2
	courseInterval = time.Second
)

// courseLabFlags raise the per-address limits for the course's one client
// address: its connections, its sessions, and the rate at which it opens
// connections (the bench dials them all at once).
func courseLabFlags(sessions int) []string {
	n := strconv.Itoa(2 * sessions * courseTabs)
	return []string{"-max-addr-conns", n, "-max-addr-sessions", n, "-addr-conn-rate", n}
}

// course runs the course against a fresh server of kind t: the class
// scenario's driver at the course's shape, the instructor watching on the
// lab.
func (b *bench) course(ctx context.Context, t target) (m metrics, err error) {
	if isLab(t.name) {
		// Before -lab-flags, which end a lab's args (bench.run), so that
		// theirs win: the flag package keeps a flag's last value.
		own := t.args[:len(t.args)-len(b.labFlags)]
		t.args = append(append(slices.Clone(own), courseLabFlags(b.courseSessions)...), b.labFlags...)
	}
	srv, stop, err := launch(ctx, t)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	r, err := b.class(ctx, srv, classShape{sessions: b.courseSessions, tabs: courseTabs, interval: courseInterval, duration: b.classDuration, watch: true})
	if err != nil {
		return nil, err
	}
	m = metrics{"sender p99 ms": r.sender.ms(99), "last-tab p50 ms": r.last.ms(50), "last-tab p99 ms": r.last.ms(99), "ops": float64(r.sender.len())}
	if r.watcher.len() > 0 {
		m["instructor lag p50 ms"], m["instructor lag p99 ms"] = r.watcher.ms(50), r.watcher.ms(99)
	}
	return m, nil
}

// courseRows are the course's lines of the tables: the last tab's p99
// against the bare server's, and the instructor's lag beside it.
func courseRows(b *bench) []row {
	return []row{
		{scenario: "course", metric: "ops"},
		{scenario: "course", metric: "sender p99 ms"},
		{scenario: "course", metric: "last-tab p50 ms"},
		{scenario: "course", metric: "last-tab p99 ms", goal: goal{def: 2},
			headline: fmt.Sprintf("course: %d sessions × %d tabs, an op per session every ~%v, an instructor watching, last tab's p99", b.courseSessions, courseTabs, courseInterval)},
		{scenario: "course", metric: "instructor lag p50 ms"},
		{scenario: "course", metric: "instructor lag p99 ms", goal: goal{def: 500, onLab: true},
			headline: fmt.Sprintf("course: the instructor's overview lag p99 ms, %d sessions", b.courseSessions)},
	}
}
