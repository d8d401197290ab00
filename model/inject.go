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

// MaxNameLength caps a display name, in characters as a person counts them
// (NameLength): an emoji with its joiners, skin tone and variation
// selector, a flag, or a letter with its accents is one.
const MaxNameLength = 40

// MaxNameBytes caps a display name's UTF-8 bytes too, whatever it counts as:
// room for forty emoji sequences of 16 bytes (a person at a laptop is 11, a
// skin-toned one 15), not for a name buried under thousands of marks.
const MaxNameBytes = 640

// maxMarksInARow is how many combining marks may follow one character:
// enough for any script's stacked accents, not for "Zalgo" text that runs
// over the rows around it in the instructor's table.
const maxMarksInARow = 8

// ErrInvalidName refuses a name that holds a control character (a newline or
// tab would break the instructor's one-line table).
var ErrInvalidName = errors.New("name must not contain control characters")

// formatCharError refuses a name holding an invisible character that can
// make a name look like another in the instructor's table or reorder the
// text around it: bidi overrides, embeddings, isolates and marks (U+202E,
// U+2066, U+200F…), zero-width spaces, soft hyphens, fillers. It is an
// ErrInvalidName.
type formatCharError struct{ r rune }

func (e formatCharError) Error() string {
	return fmt.Sprintf("name must not contain invisible format characters (%U): they can disguise a name", e.r)
}

func (e formatCharError) Is(target error) bool { return target == ErrInvalidName }

// Characters of emoji sequences, which phone keyboards make and a name keeps.
const (
	zwj       = '\u200D' // zero-width joiner: 👩‍💻 is 👩 ZWJ 💻
	zwnj      = '\u200C' // zero-width non-joiner: needed in Persian and Indic names
	tagFirst  = '\U000E0020'
	tagLast   = '\U000E007F' // tag characters: a subdivision flag such as 🏴󠁧󠁢󠁳󠁣󠁴󠁿 is 🏴 and tags
	blackFlag = '\U0001F3F4'
)

// NormalizeName is the one place that decides a display name, for a rename
// and for joining a class (the store compares the result by NameKey). It
// trims surrounding white space and makes every other space one plain
// space (runs of them one), and refuses rather than cuts: more than
// MaxNameLength characters (NameLength) or MaxNameBytes bytes
// (*LimitError); control characters, line and paragraph separators, and
// invisible format characters (category Cf: bidi controls, zero-width
// spaces) other than what emoji and scripts need: a joiner or non-joiner
// between two visible characters, and tag characters after 🏴
// (ErrInvalidName). Variation selectors, skin tones, combining marks and
// regional-indicator flags are ordinary characters of a name. "" (or only
// spaces) clears the name.
func NormalizeName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", ErrInvalidName
	}
	name = strings.Join(strings.FieldsFunc(strings.TrimSpace(name), isNameSpace), " ")
	if NameLength(name) > MaxNameLength {
		return "", &LimitError{Cap: "name length in characters", Max: MaxNameLength}
	}
	if len(name) > MaxNameBytes {
		return "", &LimitError{Cap: "name length in bytes", Max: MaxNameBytes}
	}
	var prev rune = ' '
	marks := 0
	for i, r := range name {
		switch {
		case unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp):
			return "", ErrInvalidName
		case isFiller(r):
			return "", formatCharError{r}
		case r == zwj || r == zwnj:
			next, _ := utf8.DecodeRuneInString(name[i+utf8.RuneLen(r):])
			if !visible(prev) || !visible(next) {
				return "", formatCharError{r}
			}
		case r >= tagFirst && r <= tagLast:
			if prev != blackFlag && (prev < tagFirst || prev > tagLast) {
				return "", formatCharError{r}
			}
		case unicode.Is(unicode.Cf, r):
			return "", formatCharError{r}
		}
		if unicode.In(r, unicode.Mn, unicode.Me) {
			if marks++; marks > maxMarksInARow {
				return "", &LimitError{Cap: "combining marks on one character", Max: maxMarksInARow}
			}
		} else {
			marks = 0
		}
		prev = r
	}
	return name, nil
}

// isNameSpace is a space inside a name, which becomes one plain space (a
// no-break space, an ideographic space…). Tabs and newlines are control
// characters, refused.
func isNameSpace(r rune) bool { return unicode.Is(unicode.Zs, r) }

// isFiller is a letter that shows nothing (Hangul fillers, the braille
// blank): it would make a name look empty or like another.
func isFiller(r rune) bool {
	switch r {
	case '\u115F', '\u1160', '\u3164', '\uFFA0', '\u2800':
		return true
	}
	return false
}

// visible reports whether r can stand on either side of a joiner: not a
// space, a mark of nothing, or another invisible character.
func visible(r rune) bool {
	return r != utf8.RuneError && !isNameSpace(r) && !unicode.Is(unicode.Cf, r) && !unicode.IsControl(r)
}

// NameLength counts name's characters as a person reads them, close to
// Unicode's grapheme clusters without their tables: a rune counts unless it
// extends the one before it (a combining mark, a variation selector, a
// skin tone, a joiner and the rune after it, a tag character), and two
// regional indicators (a flag) count as one.
func NameLength(name string) int {
	n, afterJoiner, indicators := 0, false, 0
	for _, r := range name {
		extends := afterJoiner || r == zwj || r == zwnj || unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) ||
			unicode.Is(unicode.Variation_Selector, r) || (r >= 0x1F3FB && r <= 0x1F3FF) || (r >= tagFirst && r <= tagLast)
		afterJoiner = r == zwj
		if r >= 0x1F1E6 && r <= 0x1F1FF { // a regional indicator: the second of a pair extends the first
			indicators++
			extends = extends || indicators%2 == 0
		} else {
			indicators = 0
		}
		if !extends {
			n++
		}
	}
	return n
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
	// PracticePreset draws each session's own next kind to practise, as
	// the student's practice frame does (practice.go), set-up included;
	// held only.
	PracticePreset
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
	PracticePreset:     "practice",
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
	case PracticePreset:
		return Injection{}, fmt.Errorf("%w: a practice is drawn, set up and held by the lab, not resolved to one message", ErrPresetNotApplicable)
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
