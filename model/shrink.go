package model

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// maxShrinkAttempts bounds the candidate traces a shrink plays.
const maxShrinkAttempts = 400

// shrink makes a failing trace shorter while it fails with the same
// property, so that the teacher's words and the trace agree: it cuts the
// frames after the failing step, drops runs of frames (halves, quarters, …,
// single frames; a dropped message takes its deliveries with it and later
// deliveries are renumbered), makes a repeated reply a delivery of the
// first, then shortens texts (a reply to "", to JSON.stringify's own
// writing, its output or reason halved, the raw text halved). Passes repeat
// until none helps or the attempts run out; it is deterministic when the
// module is.
func shrink(newClient NewClient, t Trace, o *outcome) (Trace, *outcome) {
	s := &shrinker{newClient: newClient, prop: o.property, best: t[:o.step+1], o: o}
	for s.attempts < maxShrinkAttempts && !s.stopped {
		n, size := len(s.best), weight(s.best)
		s.dropRuns()
		s.aliasRepeats()
		s.shortenTexts()
		if len(s.best) == n && weight(s.best) == size {
			break
		}
	}
	return s.best, s.o
}

type shrinker struct {
	newClient NewClient
	prop      Property
	best      Trace
	o         *outcome
	attempts  int
	stopped   bool // the module wrapped ErrStop: keep what we have
}

// weight is a trace's text size, the second measure of a shorter trace.
func weight(t Trace) int {
	n := 0
	for _, f := range t {
		n += len(f.Raw)
	}
	return n
}

// try plays t and keeps it when it is shorter and fails the same way.
func (s *shrinker) try(t Trace) bool {
	if s.stopped || s.attempts >= maxShrinkAttempts || len(t) == 0 {
		return false
	}
	if len(t) > len(s.best) || len(t) == len(s.best) && weight(t) >= weight(s.best) {
		return false
	}
	s.attempts++
	o, err := play(s.newClient, t)
	if errors.Is(err, ErrStop) || o != nil && o.stop != nil {
		s.stopped = true
		return false
	}
	if err != nil || o == nil {
		return false
	}
	if o.property != s.prop {
		return false
	}
	s.best, s.o = t[:o.step+1], o
	return true
}

func (s *shrinker) dropRuns() {
	for size := len(s.best) / 2; size >= 1; size /= 2 {
		for i := 0; i+size <= len(s.best); {
			drop := make([]bool, len(s.best))
			for j := i; j < i+size; j++ {
				drop[j] = true
			}
			t := without(s.best, drop)
			renumbered := renumberRuns(s.best, drop, t)
			if !s.try(renumbered) && (equal(renumbered, t) || !s.try(t)) {
				i++
			}
		}
	}
}

// aliasRepeats drops a queued reply whose text an earlier one has, its
// deliveries becoming the earlier message's.
func (s *shrinker) aliasRepeats() {
	for j := 0; j < len(s.best); j++ {
		f := s.best[j]
		if f.Kind != QueueReply {
			continue
		}
		number, first := 0, 0 // message numbers of s.best[j] and of its first copy
		for i := 0; i <= j; i++ {
			if g := s.best[i]; g.Kind == QueueReply || g.Kind == QueueDeadline {
				number++
				if first == 0 && g.Kind == QueueReply && g.Raw == f.Raw {
					first = number
				}
			}
		}
		if first == number {
			continue
		}
		t := make(Trace, len(s.best))
		copy(t, s.best)
		for k := j + 1; k < len(t); k++ {
			if t[k].Kind == Deliver && t[k].Message == number {
				t[k].Message = first
			}
		}
		drop := make([]bool, len(t))
		drop[j] = true
		s.try(without(t, drop))
	}
}

func (s *shrinker) shortenTexts() {
	for j := 0; j < len(s.best); j++ {
		if s.best[j].Kind != QueueReply {
			continue
		}
		for _, raw := range shorterTexts(s.best[j].Raw) {
			t := make(Trace, len(s.best))
			copy(t, s.best)
			t[j].Raw = raw
			if s.try(t) {
				break
			}
		}
	}
}

// shorterTexts are the texts tried in place of a reply's raw, shortest first.
func shorterTexts(raw string) []string {
	out := []string{""}
	if r, err := ParseReply(raw); err == nil {
		kind, field := "completed", "output"
		if r.Outcome == Rejection {
			kind, field = "rejected", "reason"
		}
		if r.Text != "" {
			out = append(out, replyJSON(r.Key, kind, field, ""))
		}
		if half := halve(r.Text); half != r.Text && half != "" {
			out = append(out, replyJSON(r.Key, kind, field, half))
		}
		out = append(out, replyJSON(r.Key, kind, field, r.Text))
	}
	if half := halve(raw); half != "" && half != raw {
		out = append(out, half)
	}
	return out
}

// halve is s's first half, cut at a rune boundary.
func halve(s string) string {
	n := len(s) / 2
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// renumberRuns is t, which is old without the frames drop marks, with the
// run numbers its replies name moved down for every start dropped before
// them (run-n as the lab writes it, n from 1), so that a reply keeps
// naming the run it named: run-3 becomes run-2 once one of the first
// three starts is gone, and a reply for a dropped run names the run
// before it.
func renumberRuns(old Trace, drop []bool, t Trace) Trace {
	var dropped []int // run numbers begun by the dropped starts
	run := 1
	for i, f := range old {
		if f.Kind == StartRun {
			run++
			if drop[i] {
				dropped = append(dropped, run)
			}
		}
	}
	if len(dropped) == 0 {
		return t
	}
	out := make(Trace, len(t))
	for i, f := range t {
		if f.Kind == QueueReply {
			f.Raw = mapRuns(f.Raw, func(n int) int {
				k := 0
				for _, d := range dropped {
					if d <= n {
						k++
					}
				}
				return n - k
			})
		}
		out[i] = f
	}
	return out
}

// mapRuns rewrites every "run-n" in s (n a number as the lab writes it)
// to "run-" + to(n).
func mapRuns(s string, to func(int) int) string {
	var b []byte
	last := 0
	for i := 0; i+4 < len(s); i++ {
		if s[i:i+4] != "run-" || s[i+4] < '1' || s[i+4] > '9' {
			continue
		}
		j := i + 4
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(s[i+4 : j])
		if err != nil {
			continue
		}
		b = append(b, s[last:i+4]...)
		b = strconv.AppendInt(b, int64(max(to(n), 1)), 10)
		last, i = j, j-1
	}
	if b == nil {
		return s
	}
	return string(append(b, s[last:]...))
}

func equal(a, b Trace) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
