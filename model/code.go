package model

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A session's code check as events: a submission (CodeSubmitted: the
// module's text and the campaign's seed) and the instructor's own cases
// (CaseAdded). The check's Result is not an event: it is Check's function
// of CodeInput, which the server computes (and may compute again) from the
// log, so a restart and every replica agree on it.

// Bounds of the code check's events.
const (
	MaxSourceBytes   = 64 << 10 // one submitted module
	MaxCodeCases     = 32       // instructor's cases in one session
	MaxCaseNameBytes = 100      // a case's name
	MaxCaseBytes     = 64 << 10 // the reply text of one case's frames
	// MaxSeed bounds a campaign's seed, so the page reads it as sent
	// (docs/code.md).
	MaxSeed = 1 << 53
)

// ErrInvalidCase refuses an instructor's case that cannot be played (its
// trace is not valid) or that the session already has by that name.
var ErrInvalidCase = errors.New("invalid case")

// ErrUnknownCase refuses the removal of a case the session does not have.
var ErrUnknownCase = errors.New("unknown case")

// CodeInput is what the check of a session's latest submission is a
// function of: Check(module of Source, Seed, Cases). Submissions counts
// the submissions so far; 0 means none (nothing to check).
type CodeInput struct {
	Submissions int
	Source      string
	Lang        Language
	Seed        uint64
	Cases       []Case // the instructor's, in the order added
}

// Code returns the session's code input. Its Cases are never written to
// again, so the caller may keep it.
func (l *Lab) Code() CodeInput { return l.code }

// SeedFor is the campaign's seed for a program: a function of its
// language and text, so that the same program gets the same campaign and
// so the same result, whoever submits it and however often, and a class
// that submits one module has one check to run (the server keeps results
// by Key).
func SeedFor(lang Language, source string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(lang.String()))
	h.Write([]byte{0})
	h.Write([]byte(source))
	return h.Sum64() % MaxSeed
}

// Key identifies what a check's result is a function of (every field but
// Submissions): two inputs with one Key have one result.
func (c CodeInput) Key() [sha256.Size]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(c.Lang.String())
	field(c.Source)
	field(strconv.FormatUint(c.Seed, 10))
	for _, cs := range c.Cases {
		field(cs.Name)
		for _, f := range cs.Frames {
			field(strconv.Itoa(int(f.Kind)))
			field(f.Raw)
			field(strconv.Itoa(f.Message))
		}
		field("")
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// Same reports whether two inputs give the same check: a result computed
// for one holds for the other.
func (c CodeInput) Same(o CodeInput) bool {
	if c.Submissions != o.Submissions || c.Source != o.Source || c.Lang != o.Lang || c.Seed != o.Seed || len(c.Cases) != len(o.Cases) {
		return false
	}
	for i := range c.Cases {
		if c.Cases[i].Name != o.Cases[i].Name || !equal(c.Cases[i].Frames, o.Cases[i].Frames) {
			return false
		}
	}
	return true
}

// next is the input after e, a CodeSubmitted or CaseAdded event. The cases
// are copied on append, so an input handed out never changes.
func (c CodeInput) next(e Event) CodeInput {
	switch e.Kind {
	case CodeSubmitted:
		c.Submissions++
		c.Source, c.Lang, c.Seed = e.Source, e.Lang, e.Seed
	case CaseAdded:
		if e.Case != nil {
			c.Cases = append(slices.Clip(c.Cases), *e.Case)
		}
	case CaseRemoved:
		if e.Case != nil {
			c.Cases = slices.DeleteFunc(slices.Clone(c.Cases), func(have Case) bool { return have.Name == e.Case.Name })
		}
	}
	return c
}

// decideCode validates a SubmitCode or AddCase command.
func (l *Lab) decideCode(cmd Command) (Event, error) {
	if cmd.Kind == SubmitCode {
		if len(cmd.Source) > MaxSourceBytes {
			return Event{}, &LimitError{Cap: "program size in bytes", Max: MaxSourceBytes}
		}
		if cmd.Seed >= MaxSeed {
			return Event{}, fmt.Errorf("a campaign's seed must be below 2^53, not %d", cmd.Seed)
		}
		if _, ok := ParseLanguage(cmd.Lang.String()); !ok {
			return Event{}, fmt.Errorf("unknown language %d", cmd.Lang)
		}
		return Event{Kind: CodeSubmitted, By: cmd.By, Source: cmd.Source, Lang: cmd.Lang, Seed: cmd.Seed}, nil
	}
	if cmd.Case == nil {
		return Event{}, fmt.Errorf("%w: no case given", ErrInvalidCase)
	}
	c := *cmd.Case
	name := strings.TrimSpace(c.Name)
	if cmd.Kind == RemoveCase {
		for _, have := range l.code.Cases {
			if have.Name == name {
				return Event{Kind: CaseRemoved, By: cmd.By, Case: &Case{Name: name}}, nil
			}
		}
		return Event{}, fmt.Errorf("%w: this session has no case named %q", ErrUnknownCase, name)
	}
	switch {
	case name == "":
		return Event{}, fmt.Errorf("%w: a case needs a name", ErrInvalidCase)
	case len(name) > MaxCaseNameBytes:
		return Event{}, fmt.Errorf("%w: a case's name has at most %d bytes", ErrInvalidCase, MaxCaseNameBytes)
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return Event{}, fmt.Errorf("%w: a case's name must not contain control characters", ErrInvalidCase)
	case len(l.code.Cases) >= MaxCodeCases:
		return Event{}, &LimitError{Cap: "instructor's cases in one session", Max: MaxCodeCases}
	}
	for _, have := range l.code.Cases {
		if have.Name == name {
			return Event{}, fmt.Errorf("%w: this session already has a case named %q", ErrInvalidCase, name)
		}
	}
	if err := ValidateTrace(c.Frames); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrInvalidCase, err)
	}
	text := 0
	frames := make(Trace, len(c.Frames))
	for i, f := range c.Frames {
		text += len(f.Raw)
		frames[i] = Command{Kind: f.Kind, Raw: f.Raw, Message: f.Message}
	}
	if text > MaxCaseBytes {
		return Event{}, &LimitError{Cap: "reply text of one case in bytes", Max: MaxCaseBytes}
	}
	return Event{Kind: CaseAdded, By: cmd.By, Case: &Case{Name: name, Frames: frames}}, nil
}

// FirstDifference replays t on the reference and on a fresh module of
// newClient, as Check plays a case, and returns the 0-based index of the
// first frame after which they differ, -1 when they agree throughout. The
// error is the trace's own (a frame the reference refuses) or newClient's.
func FirstDifference(newClient NewClient, t Trace) (int, error) {
	o, err := play(newClient, t)
	if err != nil || o == nil {
		return -1, err
	}
	return o.step, nil
}
