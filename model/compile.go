package model

import "strings"

// The lesson's module can be written in JavaScript or in ReScript, the
// lesson's own language; a ReScript submission is compiled before it is
// checked, and what the compiler said is data the check's result carries
// (docs/code.md, "ReScript").

// Language is what a submitted module is written in. The zero value is
// JavaScript, so a submission that names none (every client before the
// language existed) stays what it was.
type Language uint8

const (
	JavaScript Language = iota
	ReScript
)

// String is the language's name in the protocol, the log and the exports.
func (l Language) String() string {
	switch l {
	case JavaScript:
		return "javascript"
	case ReScript:
		return "rescript"
	}
	return ""
}

// ParseLanguage reads a language's name; "" is JavaScript.
func ParseLanguage(s string) (Language, bool) {
	switch s {
	case "", "javascript":
		return JavaScript, true
	case "rescript":
		return ReScript, true
	}
	return 0, false
}

// MarshalText writes the language's name, so JSON carries it as a string.
func (l Language) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// Diagnostic is one message of the compiler about a submitted module:
// its range in the source as submitted (1-based lines and columns, End*
// the last character's, as the compiler prints them), the compiler's
// warning number (nil for an error that is not a warning), whether it
// stops the build, and the compiler's explanation.
type Diagnostic struct {
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"endLine"`
	EndColumn int    `json:"endColumn"`
	Warning   *int   `json:"warning"`
	Severity  string `json:"severity"` // SeverityError or SeverityWarning
	Text      string `json:"text"`
}

// A diagnostic's severity: an error refuses the build (a warning the
// lesson's flags make an error included); a warning does not.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// NonExhaustive is the compiler's warning number for a match that
// forgets a case: the one the lesson's "What the compiler checks" is about.
const NonExhaustive = 8

// CompilerTasks are the two things the lesson asks a student to try on
// the compiler ("What the compiler checks"): delete the Rejected arm of
// view's match, and add a Cancelled constructor to the status, each
// shown by a refused build that names the missing case.
type CompilerTasks struct {
	MissingRejected bool `json:"missingRejected"`
	AddCancelled    bool `json:"addCancelled"`
}

// Or is t with what o shows done added: a task once done stays done.
func (t CompilerTasks) Or(o CompilerTasks) CompilerTasks {
	return CompilerTasks{MissingRejected: t.MissingRejected || o.MissingRejected, AddCancelled: t.AddCancelled || o.AddCancelled}
}

// TasksOf says which of the lesson's tasks a build's diagnostics show:
// a non-exhaustive match, refused, whose example of the missing case
// names Rejected, or Cancelled.
func TasksOf(ds []Diagnostic) CompilerTasks {
	var t CompilerTasks
	for _, d := range ds {
		if d.Severity != SeverityError || d.Warning == nil || *d.Warning != NonExhaustive {
			continue
		}
		t.MissingRejected = t.MissingRejected || namesCase(d.Text, "Rejected")
		t.AddCancelled = t.AddCancelled || namesCase(d.Text, "Cancelled")
	}
	return t
}

// namesCase reports whether a non-exhaustive match's text gives the
// constructor as (part of) its example of the missing case.
func namesCase(text, constructor string) bool {
	_, example, ok := strings.Cut(text, "for example:")
	if !ok {
		example = text
	}
	for i := 0; ; {
		j := strings.Index(example[i:], constructor)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(constructor)
		before := j == 0 || !isIdentByte(example[j-1])
		after := end == len(example) || !isIdentByte(example[end])
		if before && after {
			return true
		}
		i = end
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '\'' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
