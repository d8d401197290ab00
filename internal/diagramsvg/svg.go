// Package diagramsvg draws a session diagram (model.Diagram) as SVG: time
// runs left to right, one step a column, so a long session grows sideways
// and scrolls; the client is the top row and each run a row below it,
// starting where it was started.
//
// The drawing is accessible on its own: role="img" named by a <title> and
// described by a <desc> that lists every delivery in words; every lane,
// message and outcome is also text in the SVG; an outcome is told by its
// word and its glyph as well as its colour, and a deadline's line by its
// dashes. The colours pass WCAG AA (4.5:1) on the white background. There
// is no script and no reference outside the document, and every text,
// students' replies included, is escaped, so markup in a reply stays text.
//
// A trace's drawing (a checker's failing case, model.DiagramOfTrace: no
// times) marks what each frame drew with data-step="i", the frame's 0-based
// index (tick i+1 of the time axis): a run's start, a message's send and
// each of its deliveries. The student's page picks a step's elements by it
// to show the step it is looking at.
//
// It is a leaf: it reads only model's values and writes bytes.
package diagramsvg

import (
	"bytes"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolcall-lab/lab/model"
)

// Size is how large the drawing is shown.
type Size uint8

const (
	Normal Size = iota // for a page: readable at 360 px wide, scrolling sideways
	Large              // for a projector: everything 1.75 times as large
)

// Options say how to draw.
type Options struct {
	Size Size
	// ShowName puts the session's display name in the title; off, the
	// drawing names no one (the projector's default).
	ShowName bool
	// ID prefixes the ids of the title and description, which must be
	// unique in the page that holds the drawing; "diagram" when empty.
	ID string
}

// The layout, in the drawing's own units (the viewBox); Large scales the
// width and height, not the layout, so both sizes draw the same picture.
const (
	labelW   = 64 // the lane names' column
	colW     = 80 // one step of the time axis
	laneGap  = 64 // from one lane to the next
	topH     = 80 // above the client lane: each arrival's lines of words
	repeatAt = 8  // a lane's name again every so many steps, for a long session scrolled sideways
	// repeatLanes is the most lanes whose names are repeated: past it (a
	// session of hundreds of runs) the repeats would be most of the
	// drawing's bytes, lanes × steps, and help nobody read it.
	repeatLanes = 32
	bottomH     = 64 // below the last lane: its messages' labels and the time axis
	fontSize    = 13
	lineH       = 15
	excerpt     = 12 // characters of a message's text shown under its send
	// titleText is the most characters of a message's text, or of a
	// delivery's explanation (which may quote the call's final output), in
	// a hover title: enough to read, and it bounds the drawing by the
	// session's counts, not by the bytes its messages hold.
	titleText = 240
)

// The colours, each at least 4.5:1 against background (the tests check).
const (
	background = "#ffffff"
	ink        = "#1f2328" // lanes and their names
	muted      = "#59636e" // run starts, held messages, the axis
)

type outcomeStyle struct {
	colour string
	word   string // the outcome's first line of words
	detail string // its second, "" for none
	glyph  glyph
}

type glyph uint8

const (
	disc     glyph = iota // filled circle
	diamond               // hollow diamond
	cross                 // ×
	ring                  // hollow circle
	triangle              // hollow triangle, a warning
)

var outcomeStyles = [model.NumArrivalOutcomes]outcomeStyle{
	model.ArrivedAccepted:        {"#116329", "accepted", "", disc},
	model.ArrivedIgnoredIdentity: {"#6639ba", "ignored:", "identity", diamond},
	model.ArrivedIgnoredFinal:    {"#7a4a00", "ignored:", "final", cross},
	model.ArrivedUnresolved:      {"#9c3d00", "unresolved", "", ring},
	model.ArrivedDiagnostic:      {"#b3261e", "diagnostic", "", triangle},
}

// Render draws d.
func Render(d model.Diagram, o Options) []byte {
	id := o.ID
	if id == "" {
		id = "diagram"
	}
	runs := len(d.Lanes) - 1
	w := x(d.End) + colW
	h := laneY(runs) + bottomH
	scale := 1.0
	if o.Size == Large {
		scale = 1.75
	}
	var b bytes.Buffer
	p := func(parts ...string) {
		for _, s := range parts {
			b.WriteString(s)
		}
	}
	title := "Session diagram"
	if o.ShowName && d.Name != "" {
		title += " of " + d.Name
	}
	p(`<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="`, attr(id+"-title"), " ", attr(id+"-desc"),
		`" width="`, num(float64(w)*scale), `" height="`, num(float64(h)*scale), `" viewBox="0 0 `, itoa(w), " ", itoa(h),
		`" font-family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif" font-size="`, itoa(fontSize), `">`, "\n")
	p(`<title id="`, attr(id+"-title"), `">`, text(title), "</title>\n")
	byMessage := make([][]model.Arrival, len(d.Messages))
	for _, a := range d.Arrivals {
		byMessage[a.Message-1] = append(byMessage[a.Message-1], a)
	}
	p(`<desc id="`, attr(id+"-desc"), `">`, text(describe(d, byMessage)), "</desc>\n")
	p(`<rect width="100%" height="100%" fill="`, background, `"/>`, "\n")

	// Lanes: the names in their column, each line from where it began.
	for i, l := range d.Lanes {
		y := laneY(i)
		p(`<text x="8" y="`, itoa(y+4), `" font-weight="bold" fill="`, ink, `">`, text(l.Name), "</text>\n")
		p(`<line x1="`, itoa(x(l.Start)), `" y1="`, itoa(y), `" x2="`, itoa(w-8), `" y2="`, itoa(y), `" stroke="`, ink, `" stroke-width="2"/>`, "\n")
		// Its name again on a grid shared by every lane, so that a reader
		// scrolled sideways reads each row's name in one column.
		for at := uint64(repeatAt); len(d.Lanes) <= repeatLanes && at < d.End; at += repeatAt {
			if at <= l.Start+1 {
				continue
			}
			p(`<text x="`, itoa(x(at)-colW/2), `" y="`, itoa(y-5), `" text-anchor="middle" font-size="11" fill="`, muted, `">`, text(l.Name), "</text>\n")
		}
		if i > 1 {
			// A run begins when the client starts it: a dotted line down
			// from the client, and the run's name where its lane begins.
			sx := x(l.Start)
			p(`<g`, step(d, l.Start), `><title>`, text(l.Name+" started by the "+l.By.String()+when(d, l.StartAt)), "</title>",
				`<line x1="`, itoa(sx), `" y1="`, itoa(laneY(0)), `" x2="`, itoa(sx), `" y2="`, itoa(y), `" stroke="`, muted, `" stroke-width="1.5" stroke-dasharray="2 3"/>`,
				`<circle cx="`, itoa(sx), `" cy="`, itoa(y), `" r="4" fill="`, muted, `"/>`,
				`<text x="`, itoa(sx+6), `" y="`, itoa(y-6), `" font-size="11" fill="`, muted, `">start `, text(l.Name), "</text></g>\n")
		}
	}
	p(`<text x="8" y="`, itoa(h-10), `" font-size="11" fill="`, muted, `">time, one step a column →</text>`, "\n")

	// Messages: each send, then each of its arrivals as a line up to the
	// client; a message never delivered is marked held.
	for i, m := range d.Messages {
		sx, sy := x(m.Seq), laneY(m.Lane)
		dash := ""
		if m.Kind == model.DeadlineMessage {
			dash = ` stroke-dasharray="7 4"`
		}
		p(`<g>`)
		for _, a := range byMessage[i] {
			st := outcomeStyles[a.Outcome]
			ax, ay := x(a.Seq), laneY(model.ClientLane)
			p(`<g`, step(d, a.Seq), `><title>`, text(arrivalTitle(m, a, d)), `</title>`,
				`<line x1="`, itoa(sx), `" y1="`, itoa(sy), `" x2="`, itoa(ax), `" y2="`, itoa(ay+8), `" stroke="`, st.colour, `" stroke-width="2"`, dash, `/>`,
				arrowhead(sx, sy, ax, ay+8, st.colour))
			drawGlyph(&b, st.glyph, ax, ay, st.colour)
			lines := []string{"msg " + m.Number, st.word, st.detail}
			if a.By == model.Instructor {
				lines = append(lines, "by instructor")
			}
			j := 0
			for _, s := range lines {
				if s == "" {
					continue
				}
				weight := ""
				if j == 0 {
					weight = ` font-weight="bold"`
				}
				j++
				p(`<text x="`, itoa(ax), `" y="`, itoa(ay-topH+4+j*lineH), `" text-anchor="middle" fill="`, st.colour, `"`, weight, `>`, text(s), "</text>")
			}
			p("</g>\n")
		}
		// The send: a dot (a square for the instructor's), its number and
		// a few characters of what it carries.
		p(`<g`, step(d, m.Seq), `><title>`, text(messageTitle(m, d)), `</title>`)
		if m.From == model.Instructor {
			p(`<rect x="`, itoa(sx-5), `" y="`, itoa(sy-5), `" width="10" height="10" fill="`, ink, `"/>`)
		} else {
			p(`<circle cx="`, itoa(sx), `" cy="`, itoa(sy), `" r="5" fill="`, ink, `"/>`)
		}
		p(`<text x="`, itoa(sx), `" y="`, itoa(sy+lineH+4), `" text-anchor="middle" font-weight="bold" fill="`, ink, `">`, text(m.Number), "</text>",
			`<text x="`, itoa(sx), `" y="`, itoa(sy+2*lineH+4), `" text-anchor="middle" font-size="11" fill="`, ink, `">`, text(short(m)), "</text>")
		if m.From == model.Instructor {
			p(`<text x="`, itoa(sx), `" y="`, itoa(sy+3*lineH+4), `" text-anchor="middle" font-size="11" fill="`, ink, `">instructor</text>`)
		}
		if len(byMessage[i]) == 0 {
			p(`<line x1="`, itoa(sx), `" y1="`, itoa(sy-6), `" x2="`, itoa(sx+colW/3), `" y2="`, itoa(sy-laneGap/2), `" stroke="`, muted, `" stroke-width="2" stroke-dasharray="3 3"/>`,
				`<text x="`, itoa(sx+colW/3+3), `" y="`, itoa(sy-laneGap/2+4), `" font-size="11" fill="`, muted, `">held</text>`)
		}
		p("</g></g>\n")
	}
	p("</svg>\n")
	return b.Bytes()
}

// step is the data-step attribute of what tick seq drew in a trace's
// drawing (the frame's 0-based index), "" in a stored session's.
func step(d model.Diagram, seq uint64) string {
	if d.Timed || seq == 0 {
		return ""
	}
	return ` data-step="` + strconv.FormatUint(seq-1, 10) + `"`
}

// x is where step seq is on the time axis.
func x(seq uint64) int { return labelW + 24 + int(seq)*colW }

// laneY is where lane i is: the client on top, run-k k lanes below.
func laneY(i int) int { return topH + i*laneGap }

func drawGlyph(b *bytes.Buffer, g glyph, cx, cy int, colour string) {
	s := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
		}
	}
	const r = 7
	stroke := `" fill="` + background + `" stroke="` + colour + `" stroke-width="2.5"/>`
	switch g {
	case disc:
		s(`<circle cx="`, itoa(cx), `" cy="`, itoa(cy), `" r="`, itoa(r), `" fill="`, colour, `"/>`)
	case ring:
		s(`<circle cx="`, itoa(cx), `" cy="`, itoa(cy), `" r="`, itoa(r-1), stroke)
	case diamond:
		s(`<polygon points="`, pts(cx, cy-r, cx+r, cy, cx, cy+r, cx-r, cy), stroke)
	case triangle:
		s(`<polygon points="`, pts(cx, cy-r, cx+r, cy+r-1, cx-r, cy+r-1), stroke)
	case cross:
		s(`<path d="M`, pts(cx-r+1, cy-r+1), `L`, pts(cx+r-1, cy+r-1), `M`, pts(cx+r-1, cy-r+1), `L`, pts(cx-r+1, cy+r-1),
			`" stroke="`, colour, `" stroke-width="3"/>`)
	}
}

// arrowhead is a filled triangle at (x2, y2) pointing along the line from
// (x1, y1).
func arrowhead(x1, y1, x2, y2 int, colour string) string {
	dx, dy := float64(x2-x1), float64(y2-y1)
	l := math.Hypot(dx, dy)
	if l == 0 {
		return ""
	}
	ux, uy := dx/l, dy/l
	const length, half = 10, 4.5
	bx, by := float64(x2)-ux*length, float64(y2)-uy*length
	return `<polygon points="` + num(float64(x2)) + "," + num(float64(y2)) + " " +
		num(bx-uy*half) + "," + num(by+ux*half) + " " + num(bx+uy*half) + "," + num(by-ux*half) +
		`" fill="` + colour + `"/>`
}

// short is a few characters of what a message carries: a reply's output
// or reason, else the start of its text; "deadline" for a deadline.
func short(m model.DiagramMessage) string {
	if m.Kind == model.DeadlineMessage {
		return "deadline"
	}
	s := m.Label
	if r, err := model.ParseReply(m.Label); err == nil {
		s = `"` + r.Text + `"`
		if r.Outcome == model.Rejection {
			s = "rejected " + s
		}
	}
	if utf8.RuneCountInString(s) > excerpt {
		rs := []rune(s)
		s = string(rs[:excerpt-1]) + "…"
	}
	return s
}

func messageTitle(m model.DiagramMessage, d model.Diagram) string {
	return "message " + m.Number + ", a " + m.Kind.String() + " queued by the " + m.From.String() + " in " + d.Lanes[m.Lane].Name + when(d, m.At) + ": " + clip(m.Label, titleText)
}

func arrivalTitle(m model.DiagramMessage, a model.Arrival, d model.Diagram) string {
	s := "message " + m.Number + " delivered in " + a.Run + " by the " + a.By.String() + when(d, a.At) + ": " + a.Outcome.String() + ". " + a.Notice
	if a.Why != "" {
		s += " (" + clip(a.Why, titleText) + ")"
	}
	return s
}

// clip cuts s to at most n characters, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// when is " at 09:00:03" for a stored time, "" in a trace.
func when(d model.Diagram, t time.Time) string {
	if !d.Timed || t.IsZero() {
		return ""
	}
	return " at " + t.UTC().Format("15:04:05")
}

// describe is the drawing in words: what a screen reader reads for it.
func describe(d model.Diagram, byMessage [][]model.Arrival) string {
	var s strings.Builder
	runs := len(d.Lanes) - 1
	s.WriteString("Time runs left to right. The top row is the client; below it ")
	s.WriteString(plural(runs, "run", "runs"))
	s.WriteString(", each a row starting where it was started. ")
	s.WriteString(plural(len(d.Messages), "message was", "messages were"))
	s.WriteString(" queued and ")
	s.WriteString(plural(len(d.Arrivals), "delivery was", "deliveries were"))
	s.WriteString(" made.")
	for _, a := range d.Arrivals {
		m := d.Messages[a.Message-1]
		s.WriteString(" Message " + m.Number + ", a " + m.Kind.String() + " from " + d.Lanes[m.Lane].Name)
		if m.From == model.Instructor {
			s.WriteString(" by the instructor")
		}
		s.WriteString(", delivered in " + a.Run)
		if a.By == model.Instructor {
			s.WriteString(" by the instructor")
		}
		s.WriteString(": " + a.Outcome.String() + ".")
	}
	for _, m := range d.Messages {
		if len(byMessage[m.ID-1]) == 0 {
			s.WriteString(" Message " + m.Number + " from " + d.Lanes[m.Lane].Name + " is held, never delivered.")
		}
	}
	return s.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return itoa(n) + " " + many
}

func itoa(n int) string { return strconv.Itoa(n) }

// num writes a coordinate with at most one decimal, the same on every run.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

func pts(xy ...int) string {
	var s strings.Builder
	for i, v := range xy {
		if i > 0 {
			if i%2 == 1 {
				s.WriteByte(',')
			} else {
				s.WriteByte(' ')
			}
		}
		s.WriteString(itoa(v))
	}
	return s.String()
}

// text escapes s for an element's text; characters XML cannot hold become
// U+FFFD.
func text(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// attr escapes s for an attribute value in double quotes.
func attr(s string) string { return text(s) }
