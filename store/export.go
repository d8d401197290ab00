package store

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/toolcall-lab/lab/model"
)

// TimeFormat is how exports write times: RFC 3339 with milliseconds, UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// CSVHeader returns the export's first row; docs/export.md documents the
// columns.
func CSVHeader() []string {
	return []string{"session", "name", "seq", "time", "actor", "kind", "message", "run", "notice"}
}

// jsonLine is one record as the JSON-lines export writes it.
type jsonLine struct {
	Session     string `json:"session"`
	Seq         uint64 `json:"seq"`
	Time        string `json:"time"`
	Actor       string `json:"actor"`
	Kind        string `json:"kind"`
	Message     int    `json:"message"`
	MessageKind string `json:"messageKind,omitempty"`
	From        string `json:"from,omitempty"`
	Label       string `json:"label,omitempty"`
	Run         string `json:"run"`
	Notice      string `json:"notice"`
	Prediction  string `json:"prediction,omitempty"` // a delivery's prediction, if one was made
	Why         string `json:"why,omitempty"`        // a practice draw's why
	// A code submission's module and seed; an instructor's case.
	Source string      `json:"source,omitempty"`
	Lang   string      `json:"language,omitempty"`
	Seed   uint64      `json:"seed,omitempty"`
	Case   *model.Case `json:"case,omitempty"`
}

// CodeLabel says what a code event was, in a few words, for the exports
// and the timeline: the program's size and seed, or the case's name.
func CodeLabel(e model.Event) string {
	switch e.Kind {
	case model.CodeSubmitted:
		if e.Lang != model.JavaScript {
			return fmt.Sprintf("%s program of %d bytes, seed %d", e.Lang, len(e.Source), e.Seed)
		}
		return fmt.Sprintf("program of %d bytes, seed %d", len(e.Source), e.Seed)
	case model.CaseAdded:
		if e.Case != nil {
			return fmt.Sprintf("case %q, %d frames", e.Case.Name, len(e.Case.Frames))
		}
	case model.CaseRemoved:
		if e.Case != nil {
			return fmt.Sprintf("case %q removed", e.Case.Name)
		}
	}
	return ""
}

// PracticeLabel says what a practice draw was, for the exports and the
// timeline: "practice: a stale reply (run started, a deadline delivered)".
func PracticeLabel(e model.Event) string {
	p := e.Practice
	if p == nil {
		return ""
	}
	out := "practice: " + p.Kind.Phrase()
	switch {
	case p.NewRun && p.Setup.ID != 0:
		out += " (a new run, a " + p.Setup.Kind.String() + " delivered)"
	case p.NewRun:
		out += " (a new run)"
	case p.Setup.ID != 0:
		out += " (a " + p.Setup.Kind.String() + " delivered)"
	}
	return out
}

// WriteJSONLines writes the records, one JSON object per line.
func WriteJSONLines(w io.Writer, recs []Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		l := jsonLine{
			Session: r.Session, Seq: r.Seq, Time: r.Time.UTC().Format(TimeFormat),
			Actor: r.Event.By.String(), Kind: Kind(r.Event), Message: r.Event.Message.ID,
			Run: r.Run, Notice: r.Notice,
		}
		switch r.Event.Kind {
		case model.MessageQueued, model.MessageInjected:
			m := r.Event.Message
			l.MessageKind, l.From, l.Label = m.Kind.String(), m.From.String(), m.Label()
		case model.Renamed:
			l.Label = r.Event.Name
		case model.MessageDelivered:
			l.Prediction = r.Event.Prediction.String()
		case model.PracticeDrawn:
			l.Label = PracticeLabel(r.Event)
			if p := r.Event.Practice; p != nil {
				l.MessageKind, l.From, l.Why = p.Message.Kind.String(), p.Message.From.String(), p.Why
			}
		case model.CodeSubmitted, model.CaseAdded, model.CaseRemoved:
			l.Label = CodeLabel(r.Event)
			l.Source, l.Seed, l.Case = r.Event.Source, r.Event.Seed, r.Event.Case
			if r.Event.Kind == model.CodeSubmitted {
				l.Lang = r.Event.Lang.String()
			}
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("writing session %s seq %d: %w", r.Session, r.Seq, err)
		}
	}
	return nil
}

// CSV writes sessions' records as CSV rows under CSVHeader.
type CSV struct{ w *csv.Writer }

// NewCSV writes the header row.
func NewCSV(w io.Writer) (*CSV, error) {
	c := &CSV{w: csv.NewWriter(w)}
	if err := c.w.Write(CSVHeader()); err != nil {
		return nil, fmt.Errorf("writing the CSV header: %w", err)
	}
	return c, nil
}

// Write writes one row per record of session s; message is empty for an
// event that concerns no message.
func (c *CSV) Write(s Session, recs []Record) error {
	for _, r := range recs {
		msg := ""
		if r.Event.Message.ID != 0 {
			msg = strconv.Itoa(r.Event.Message.ID)
		}
		row := []string{s.ID, s.Name, strconv.FormatUint(r.Seq, 10), r.Time.UTC().Format(TimeFormat),
			r.Event.By.String(), Kind(r.Event), msg, r.Run, r.Notice}
		for i := range row {
			row[i] = CSVCell(row[i])
		}
		if err := c.w.Write(row); err != nil {
			return fmt.Errorf("writing session %s seq %d: %w", s.ID, r.Seq, err)
		}
	}
	return nil
}

// CSVCell defuses a cell a spreadsheet would read as a formula: one that
// begins with =, +, -, @, a tab or a carriage return gets a leading '
// (OWASP, CSV Injection). Every cell goes through it: names are the
// students', and the other columns cost nothing to check.
func CSVCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// Flush writes what is buffered and reports the first write error.
func (c *CSV) Flush() error {
	c.w.Flush()
	return c.w.Error()
}
