package diagramsvg

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func start() model.Command           { return model.Command{Kind: model.StartRun} }
func queue(raw string) model.Command { return model.Command{Kind: model.QueueReply, Raw: raw} }
func queueDeadline() model.Command   { return model.Command{Kind: model.QueueDeadline} }
func deliver(id int) model.Command   { return model.Command{Kind: model.Deliver, Message: id} }

func completion(run, output string) string {
	return `{"runId":"` + run + `","callId":"lookup","kind":"completed","output":"` + output + `"}`
}

// seed is the walkthrough's nine steps, then an instructor's markup-like
// reply delivered at once, and one held reply never delivered.
func seed(t *testing.T) model.Diagram {
	t.Helper()
	trace := []model.Command{
		queue(completion("run-1", "Old answer")),
		start(), queue(completion("run-2", "New answer")), deliver(2),
		deliver(1),
		deliver(2), queue(completion("run-2", "Other answer")), deliver(3), queue(`{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Nope"}`), deliver(4),
		start(), queueDeadline(), queue(completion("run-3", "Answer for run-3")), deliver(5), deliver(6),
		start(), queueDeadline(), queue(`{"runId":"run-4","callId":"lookup","kind":"rejected","reason":"The query is empty"}`), deliver(7), deliver(8),
		start(), queueDeadline(), queue(completion("run-5", "Answer for run-5")), deliver(10), deliver(9), queueDeadline(), start(), deliver(11),
		queue(`{"runId":"run-6","callId":"search","kind":"completed","output":"x"}`), deliver(12), queue(`{`), deliver(13),
		queue(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`), deliver(14),
		queue(completion("run-6", "")), deliver(15), start(), queue(completion("run-7", "<strong>Found it</strong>")), deliver(16),
		{Kind: model.Inject, By: model.Instructor, Inject: model.Injection{Kind: model.ReplyMessage, Raw: `</text><script>alert("x")</script>`, Deliver: true}},
		queue(completion("run-7", "held & waiting")),
		{Kind: model.Rename, Name: "Ada <b>"},
	}
	d, err := model.DiagramOfTrace(trace, model.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parse reads svg as XML and returns the text of every element by name,
// failing the test if it is not well-formed.
func parse(t *testing.T, svg []byte) map[string][]string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	texts := map[string][]string{}
	var stack []string
	var cur []*strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			cur = append(cur, &strings.Builder{})
		case xml.CharData:
			if len(cur) > 0 {
				cur[len(cur)-1].Write(tok)
			}
		case xml.EndElement:
			n := len(stack) - 1
			texts[stack[n]] = append(texts[stack[n]], cur[n].String())
			stack, cur = stack[:n], cur[:n]
		}
	}
	return texts
}

func TestRender(t *testing.T) {
	t.Parallel()
	d := seed(t)
	svg := Render(d, Options{})
	texts := parse(t, svg)
	if len(texts["svg"]) != 1 || !bytes.HasPrefix(svg, []byte(`<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="diagram-title diagram-desc"`)) {
		t.Fatalf("root: %.200s", svg)
	}
	if got := texts["title"]; len(got) == 0 || got[0] != "Session diagram" {
		// The root's title comes first; the name is off by default.
		t.Errorf("title %q", got)
	}
	desc := texts["desc"]
	if len(desc) != 1 || !strings.Contains(desc[0], "Message 1, a reply from run-1, delivered in run-2: ignored: different identity.") ||
		!strings.Contains(desc[0], "Message 17 from run-7 is held, never delivered.") {
		t.Errorf("desc %q", desc)
	}
	for _, bad := range []string{"<script", "<strong", "<b>", "javascript:", "href"} {
		if bytes.Contains(svg, []byte(bad)) {
			t.Errorf("the drawing holds %q", bad)
		}
	}
	all := strings.Join(texts["text"], "\n") + strings.Join(texts["title"], "\n")
	for _, want := range []string{"client", "run-1", "run-7", "msg 1", "accepted", "ignored:", "identity", "final", "unresolved", "diagnostic",
		"by instructor", "I1", "instructor", "held", `</text><script>alert("x")</script>`, "<strong>Found it</strong>"} {
		if !strings.Contains(all, want) {
			t.Errorf("no text %q in the drawing", want)
		}
	}
	golden(t, "seed.svg", svg)
}

func TestRenderOptions(t *testing.T) {
	t.Parallel()
	d := seed(t)
	normal, large := parse(t, Render(d, Options{})), Render(d, Options{Size: Large, ShowName: true, ID: "watched"})
	texts := parse(t, large)
	if got := texts["title"]; got[0] != "Session diagram of Ada <b>" {
		t.Errorf("title %q", got[0])
	}
	if !bytes.Contains(large, []byte(`aria-labelledby="watched-title watched-desc"`)) || !bytes.Contains(large, []byte(`<title id="watched-title">`)) {
		t.Error("the ids do not take the prefix")
	}
	// Large draws the same picture, larger.
	if len(normal["text"]) != len(texts["text"]) {
		t.Error("the large drawing has other texts")
	}
	var root struct {
		Width   string `xml:"width,attr"`
		ViewBox string `xml:"viewBox,attr"`
	}
	if err := xml.Unmarshal(large, &root); err != nil {
		t.Fatal(err)
	}
	vb := strings.Fields(root.ViewBox)
	vw, _ := strconv.Atoi(vb[2])
	if w, _ := strconv.ParseFloat(root.Width, 64); w != float64(vw)*1.75 {
		t.Errorf("width %s for a viewBox %s", root.Width, root.ViewBox)
	}
	// Rendering is deterministic.
	if !bytes.Equal(Render(d, Options{}), Render(d, Options{})) {
		t.Error("two renderings differ")
	}
}

func TestRenderEmpty(t *testing.T) {
	t.Parallel()
	d, _ := model.DiagramOfTrace(nil, model.Limits{})
	texts := parse(t, Render(d, Options{}))
	if got := texts["desc"]; len(got) != 1 || !strings.Contains(got[0], "1 run,") || !strings.Contains(got[0], "0 messages were") {
		t.Errorf("desc %q", got)
	}
}

// TestContrast: every colour text or a mark is drawn in passes WCAG AA for
// text (4.5:1) on the background.
func TestContrast(t *testing.T) {
	t.Parallel()
	colours := map[string]string{"ink": ink, "muted": muted}
	for o, s := range outcomeStyles {
		colours[model.ArrivalOutcome(o).String()] = s.colour
	}
	for name, c := range colours {
		if r := contrast(c, background); r < 4.5 {
			t.Errorf("%s %s: contrast %.2f on %s", name, c, r, background)
		}
	}
	// The check can fail.
	if contrast("#888888", background) >= 4.5 {
		t.Fatal("contrast of grey")
	}
}

func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

func luminance(hex string) float64 {
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		c := float64(v) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the drawing differs from %s (go test -update rewrites it, then look at it)", path)
	}
}

// TestRenderBounded: the largest session the server's default caps allow
// (1,000 runs, 256 held messages filling 1 MiB, 1,024 deliveries, 200
// renames) draws in under 2 MiB, whatever its messages hold: a delivery's
// explanation quoting a 64 KiB output is cut in its title (docs/limits.md).
func TestRenderBounded(t *testing.T) {
	for _, runs := range []int{31, 999} {
		var trace []model.Command
		for range runs {
			trace = append(trace, model.Command{Kind: model.StartRun, By: model.Student})
		}
		for i := range 256 {
			raw := "{"
			if i < 15 {
				raw = `{"runId":"run-` + strconv.Itoa(runs+1) + `","callId":"lookup","kind":"completed","output":"` + strings.Repeat("<", 65000) + `"}`
			}
			trace = append(trace, model.Command{Kind: model.QueueReply, By: model.Student, Raw: raw})
		}
		for i := range 1024 {
			trace = append(trace, model.Command{Kind: model.Deliver, By: model.Student, Message: 1 + i%256})
		}
		for i := range 200 {
			trace = append(trace, model.Command{Kind: model.Rename, By: model.Student, Name: "n" + strconv.Itoa(i)})
		}
		d, err := model.DiagramOfTrace(trace, model.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(Render(d, Options{Size: Large, ShowName: true})); n > 2<<20 {
			t.Errorf("%d runs: %d bytes", runs+1, n)
		}
	}
}

// TestRenderSteps: a trace's drawing marks what each frame drew with
// data-step, the frame's 0-based index (a run's start, a message's send,
// each delivery), so a page can point at a step; a stored session's
// drawing (with times) has no such marks.
func TestRenderSteps(t *testing.T) {
	t.Parallel()
	trace := []model.Command{queueDeadline(), start(), deliver(1), queue(completion("run-2", "A")), deliver(2), deliver(1)}
	d, err := model.DiagramOfTrace(trace, model.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	svg := Render(d, Options{})
	var root struct {
		Groups []struct {
			Step   string `xml:"data-step,attr"`
			Title  string `xml:"title"`
			Groups []struct {
				Step  string `xml:"data-step,attr"`
				Title string `xml:"title"`
			} `xml:"g"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(svg, &root); err != nil {
		t.Fatal(err)
	}
	steps := map[string][]string{}
	for _, g := range root.Groups {
		if g.Step != "" {
			steps[g.Step] = append(steps[g.Step], g.Title)
		}
		for _, h := range g.Groups {
			if h.Step != "" {
				steps[h.Step] = append(steps[h.Step], h.Title)
			}
		}
	}
	want := map[string]string{
		"0": "message 1, a deadline queued",
		"1": "run-2 started",
		"2": "message 1 delivered in run-2",
		"3": "message 2, a reply queued",
		"4": "message 2 delivered in run-2",
		"5": "message 1 delivered in run-2",
	}
	if len(steps) != len(want) {
		t.Errorf("steps marked: %q", steps)
	}
	for i, prefix := range want {
		if len(steps[i]) != 1 || !strings.HasPrefix(steps[i][0], prefix) {
			t.Errorf("data-step=%s marks %q, want one group titled %q…", i, steps[i], prefix)
		}
	}

	var events []model.DiagramEvent
	lab := model.NewLab()
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	for i, cmd := range trace {
		ev, err := lab.Decide(cmd, model.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lab.Apply(ev); err != nil {
			t.Fatal(err)
		}
		events = append(events, model.DiagramEvent{Seq: uint64(i + 1), At: at.Add(time.Duration(i) * time.Second), Event: ev})
	}
	stored, err := model.DiagramOf(events)
	if err != nil {
		t.Fatal(err)
	}
	if svg := Render(stored, Options{}); bytes.Contains(svg, []byte("data-step")) {
		t.Error("a stored session's drawing marks steps")
	}
}
