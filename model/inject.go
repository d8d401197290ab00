package model

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// MaxNameLength caps a display name, in characters (Unicode code points).
const MaxNameLength = 40

// ErrInvalidName refuses a name that holds a control character (a newline or
// tab would break the instructor's one-line table).
var ErrInvalidName = errors.New("name must not contain control characters")

// formatCharError refuses a name holding a format character (Unicode
// category Cf: bidi overrides such as U+202E, zero-width characters), which
// can make a name look like another in the instructor's table. It is an
// ErrInvalidName.
type formatCharError struct{ r rune }

func (e formatCharError) Error() string {
	return fmt.Sprintf("name must not contain invisible format characters (%U): they can disguise a name", e.r)
}

func (e formatCharError) Is(target error) bool { return target == ErrInvalidName }

// NormalizeName returns the name a session shows: trimmed of surrounding
// white space, at most MaxNameLength characters, no control characters and
// no format characters (category Cf). "" (or only spaces) clears the name.
func NormalizeName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > MaxNameLength {
		return "", &LimitError{Cap: "name length in characters", Max: MaxNameLength}
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return "", ErrInvalidName
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return unicode.Is(unicode.Cf, r) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return "", formatCharError{r}
	}
	return name, nil
}

// Preset names an injection built from a session's own history.
type Preset uint8

const (
	NoPreset           Preset = iota // a free-form message
	StaleReply                       // a completion for an older run: the newest held one, else one for the previous run; none at run-1
	DuplicateFinal                   // the exact text of the reply that recorded the current final outcome
	ContradictoryFinal               // the opposite final kind for the current run
	WrongCallID                      // a completion for the current run with another callId
	MalformedJSON                    // the current draft cut short: not JSON
	WrongShape                       // a completion whose output is a number
	MarkupOutput                     // a completion whose output looks like HTML
	EmptyOutput                      // a completion with an empty output, still a completion
	CurrentDeadline                  // a deadline for the current call
	StaleDeadline                    // a deadline for the previous run; none at run-1
)

var presetNames = [...]string{
	NoPreset:           "",
	StaleReply:         "staleReply",
	DuplicateFinal:     "duplicateFinal",
	ContradictoryFinal: "contradictoryFinal",
	WrongCallID:        "wrongCallId",
	MalformedJSON:      "malformedJson",
	WrongShape:         "wrongShape",
	MarkupOutput:       "markupOutput",
	EmptyOutput:        "emptyOutput",
	CurrentDeadline:    "deadline",
	StaleDeadline:      "staleDeadline",
}

func (p Preset) String() string {
	if int(p) < len(presetNames) {
		return presetNames[p]
	}
	return "preset(" + strconv.Itoa(int(p)) + ")"
}

// Presets lists every preset, in the order the console offers them.
func Presets() []Preset {
	out := make([]Preset, 0, len(presetNames)-1)
	for p := StaleReply; int(p) < len(presetNames); p++ {
		out = append(out, p)
	}
	return out
}

// ParsePreset finds a preset by its name ("staleReply", …).
func ParsePreset(name string) (Preset, bool) {
	for _, p := range Presets() {
		if p.String() == name {
			return p, true
		}
	}
	return NoPreset, false
}

// ErrPresetNotApplicable refuses a preset the session's history cannot
// supply, such as a duplicate before any final reply.
var ErrPresetNotApplicable = errors.New("preset not applicable")

// errNoOlderRun refuses a stale preset at run-1: a message for "run-0", a
// run that never existed, would teach nothing about stale replies.
var errNoOlderRun = fmt.Errorf("%w: no older run yet (the session is at run-1; a stale message needs a run started before the current one)", ErrPresetNotApplicable)

// The texts the presets put in their replies.
const (
	WrongCallIDValue = "search"
	MarkupText       = `<img src="x" onerror="alert(1)"><b>Answer</b>`
)

// Preset resolves p against the session as it is now. The result is a
// free-form injection (Deliver unset).
func (l *Lab) Preset(p Preset) (Injection, error) {
	cur := l.call.Key
	older := Key{RunID: runID(l.runs - 1), CallID: CallID}
	reply := func(key Key, kind, field, text string) Injection {
		return Injection{Kind: ReplyMessage, Raw: replyJSON(key, kind, field, text)}
	}
	switch p {
	case StaleReply:
		if raw, ok := l.heldStaleCompletion(); ok {
			return Injection{Kind: ReplyMessage, Raw: raw}, nil
		}
		if l.runs < 2 {
			return Injection{}, errNoOlderRun
		}
		return reply(older, "completed", "output", "Stale answer for "+older.RunID), nil
	case DuplicateFinal:
		if l.accepted == 0 {
			return Injection{}, fmt.Errorf("%w: no final reply to duplicate yet", ErrPresetNotApplicable)
		}
		return Injection{Kind: ReplyMessage, Raw: l.queue[l.accepted-1].Raw}, nil
	case ContradictoryFinal:
		switch l.call.Status {
		case Completed:
			return reply(cur, "rejected", "reason", "Contradictory rejection for "+cur.RunID), nil
		case Rejected:
			return reply(cur, "completed", "output", "Contradictory completion for "+cur.RunID), nil
		}
		return Injection{}, fmt.Errorf("%w: no final reply to contradict yet", ErrPresetNotApplicable)
	case WrongCallID:
		return reply(Key{RunID: cur.RunID, CallID: WrongCallIDValue}, "completed", "output", "Answer for "+cur.RunID), nil
	case MalformedJSON:
		d := Draft(cur)
		return Injection{Kind: ReplyMessage, Raw: d[:len(d)-1]}, nil
	case WrongShape:
		b := appendKey(nil, cur)
		return Injection{Kind: ReplyMessage, Raw: string(append(b, `,"kind":"completed","output":42}`...))}, nil
	case MarkupOutput:
		return reply(cur, "completed", "output", MarkupText), nil
	case EmptyOutput:
		return reply(cur, "completed", "output", ""), nil
	case CurrentDeadline:
		return Injection{Kind: DeadlineMessage, Key: cur}, nil
	case StaleDeadline:
		if l.runs < 2 {
			return Injection{}, errNoOlderRun
		}
		return Injection{Kind: DeadlineMessage, Key: older}, nil
	}
	return Injection{}, fmt.Errorf("unknown preset %d", p)
}

// heldStaleCompletion finds the newest held completion for an older run of
// this call, so that a stale reply replays the session's own history.
func (l *Lab) heldStaleCompletion() (string, bool) {
	for i := len(l.queue) - 1; i >= 0; i-- {
		m := l.queue[i]
		if m.Kind != ReplyMessage {
			continue
		}
		pr := l.decoded(m.ID)
		if r, err := pr.reply, pr.err; err == nil && r.Outcome == Completion && r.Key.CallID == CallID && r.Key.RunID != l.call.Key.RunID {
			return m.Raw, true
		}
	}
	return "", false
}

// appendKey writes `{"runId":…,"callId":…` with JavaScript's escapes.
func appendKey(b []byte, key Key) []byte {
	b = append(b, `{"runId":`...)
	b = jsjson.AppendString(b, key.RunID)
	b = append(b, `,"callId":`...)
	return jsjson.AppendString(b, key.CallID)
}

// replyJSON writes a reply as JSON.stringify would, keys in the seed's order.
func replyJSON(key Key, kind, field, text string) string {
	b := appendKey(make([]byte, 0, 96), key)
	b = append(b, `,"kind":`...)
	b = jsjson.AppendString(b, kind)
	b = append(b, ',')
	b = jsjson.AppendString(b, field)
	b = append(b, ':')
	b = jsjson.AppendString(b, text)
	return string(append(b, '}'))
}
