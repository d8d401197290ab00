package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// seedStepsInPage does the seed's nine steps in the page as
// TestBrowserExerciseSeedSteps does them (clicks and typing), waiting for
// each state but not for the exercise panel: 16 messages, 17 deliveries,
// three of them with a prediction (two right, one wrong).
func seedStepsInPage(l *expectedLab) {
	l.p.t.Helper()
	l.queueOutput("step 1", "Old answer")
	l.start("step 2: start run-2")
	l.queueOutput("step 2", "New answer")
	l.p.predict("accepted") // right
	l.deliver("step 2: deliver 2", 2, seedCompleted, "Completed", "New answer")
	l.p.predict("accepted") // wrong: a stale reply is ignored
	l.deliver("step 3: deliver 1", 1, seedOtherCall, "Completed", "New answer")
	l.deliver("step 4: deliver 2 again", 2, seedFinal, "Completed", "New answer")
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"completed","output":"Another answer"}`)
	l.deliver("step 4: deliver 3", 3, seedFinal, "Completed", "New answer")
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Changed my mind"}`)
	l.deliver("step 4: deliver 4", 4, seedFinal, "Completed", "New answer")
	l.start("step 5: start run-3")
	l.queueDeadline("step 5")
	l.queueShown("step 5: default completion", draftFor("run-3"))
	l.p.predict("unresolved") // right
	l.deliver("step 5: deliver the deadline", 5, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 5: deliver the completion", 6, seedCompleted, "Completed", "Answer for run-3")
	l.start("step 6: start run-4")
	l.queueDeadline("step 6")
	l.queuePasted("step 6", `{"runId":"run-4","callId":"lookup","kind":"rejected","reason":"The query is empty"}`)
	l.deliver("step 6: deliver the deadline", 7, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 6: deliver the rejection", 8, seedRejected, "Rejected", "The query is empty")
	l.start("step 7: start run-5")
	l.queueDeadline("step 7")
	l.queueShown("step 7: default completion", draftFor("run-5"))
	l.deliver("step 7: deliver the completion", 10, seedCompleted, "Completed", "Answer for run-5")
	l.deliver("step 7: deliver the deadline", 9, seedDeadlineDone, "Completed", "Answer for run-5")
	l.queueDeadline("step 7: another deadline")
	l.start("step 7: start run-6")
	l.deliver("step 7: deliver the old deadline", 11, seedDeadlineCall, "Pending", "")
	l.queuePasted("step 8", `{"runId":"run-6","callId":"search","kind":"completed","output":"Wrong call"}`)
	l.deliver("step 8: another callId", 12, seedOtherCall, "Pending", "")
	l.queueTyped("step 8", `{`)
	l.deliver("step 8: broken JSON", 13, seedBadJSON, "Pending", "")
	l.queuePasted("step 8", `{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`)
	l.deliver("step 8: numeric output", 14, seedBadShape, "Pending", "")
	l.start("step 9: start run-7")
	l.queuePasted("step 9", `{"runId":"run-7","callId":"lookup","kind":"completed","output":""}`)
	l.deliver("step 9: empty output", 15, seedCompleted, "Completed", "")
	l.start("step 9: start run-8")
	l.queuePasted("step 9", `{"runId":"run-8","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`)
	l.deliver("step 9: markup output", 16, seedCompleted, "Completed", "<strong>Found it</strong>")
}

// seedArrivals are the seed's deliveries in time order: the message and
// the outcome the drawing marks it with.
var seedArrivals = []string{
	"2 accepted", "1 ignored: different identity", "2 ignored: final already recorded",
	"3 ignored: final already recorded", "4 ignored: final already recorded",
	"5 unresolved", "6 accepted", "7 unresolved", "8 accepted",
	"10 accepted", "9 ignored: final already recorded", "11 ignored: different identity",
	"12 ignored: different identity", "13 diagnostic", "14 diagnostic", "15 accepted", "16 accepted",
}

// diagramView is a drawing shown in a page, read from the DOM.
type diagramView struct {
	Seq      string   `json:"seq"`   // the box's data-seq: the state it was fetched for
	Title    string   `json:"title"` // the <svg>'s own title
	Desc     string   `json:"desc"`
	Width    float64  `json:"width"`
	Sends    []string `json:"sends"`    // each message's number, in time order
	Arrivals []string `json:"arrivals"` // "number outcome", in time order
	Labelled bool     `json:"labelled"` // aria-labelledby names the title and desc
	Scrolls  bool     `json:"scrolls"`  // the box is wider inside than shown
	PageWide bool     `json:"pageWide"` // the page itself scrolls sideways
	Status   string   `json:"status"`
}

func (v diagramView) String() string {
	type fields diagramView
	return fmt.Sprintf("%+v", fields(v))
}

// diagramJS reads the drawing in box #%s: its sends and arrivals ordered
// by where they are on the time axis (their x), which is their order in
// time.
const diagramJS = `((box, status) => {
	const svg = box.querySelector(":scope > svg");
	const out = { seq: box.dataset.seq || "", status: status ? status.textContent : "", sends: [], arrivals: [],
		scrolls: box.scrollWidth > box.clientWidth, pageWide: document.documentElement.scrollWidth > document.documentElement.clientWidth,
		title: "", desc: "", width: 0, labelled: false };
	if (!svg) return out;
	out.title = svg.querySelector(":scope > title")?.textContent || "";
	out.desc = svg.querySelector(":scope > desc")?.textContent || "";
	out.width = Number(svg.getAttribute("width"));
	const ids = (svg.getAttribute("aria-labelledby") || "").split(" ");
	out.labelled = svg.getAttribute("role") === "img" && ids.length === 2 && ids.every((id) => document.getElementById(id)?.closest("svg") === svg);
	const sends = [], arrivals = [];
	for (const t of svg.querySelectorAll("g > title")) {
		const text = t.textContent;
		let m = /^message (\S+) delivered in \S+ by the \S+(?: at [\d:]+)?: ([^.]+)\./.exec(text);
		if (m) {
			const line = t.parentElement.querySelector("line");
			arrivals.push([Number(line.getAttribute("x2")), m[1] + " " + m[2]]);
			continue;
		}
		m = /^message (\S+), a /.exec(text);
		if (m) {
			const dot = t.parentElement.querySelector("circle, rect");
			sends.push([Number(dot.getAttribute("cx") ?? dot.getAttribute("x")), m[1]]);
		}
	}
	const byX = (a, b) => a[0] - b[0];
	out.sends = sends.sort(byX).map((s) => s[1]);
	out.arrivals = arrivals.sort(byX).map((a) => a[1]);
	return out;
})(document.getElementById(%q), document.getElementById(%q))`

func (p *tab) diagram(box, status, what string, ok func(diagramView) bool) diagramView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (diagramView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[diagramView](fmt.Sprintf(diagramJS, box, status)))
	}, ok)
}

// complete reports whether v is the seed's nine steps drawn whole.
func complete(v diagramView) bool {
	want := make([]string, 16)
	for i := range want {
		want[i] = fmt.Sprint(i + 1)
	}
	return slices.Equal(v.Sends, want) && slices.Equal(v.Arrivals, seedArrivals)
}

// TestBrowserSessionDiagram: after the seed's nine steps, the student
// page's Diagram section (opened before the first step, so it follows the
// session live) shows every message and every delivery with its outcome
// in time order, at 1280 and 360 px (scrolling sideways in its own box),
// with no axe-core violation; the console's watched session and the
// projector's debrief view show the same diagram, the projector large and
// without the name until the teacher shows it. With LAB_SCREENSHOT=1 it
// writes docs/diagram-*.png.
func TestBrowserSessionDiagram(t *testing.T) {
	src := axeSource(t)
	lab := startServer(t, server.Config{InstructorToken: testToken})
	ts := httptest.NewServer(lab.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, lab) })
	cl := createClass(t, ts, "Distributed systems, Monday")
	id := joinedSession(t, ts, "127.0.0.2", cl.Code, "Ada")

	student := newBrowser(t)
	student.do("a desktop opens the session", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/lab/"+id))
	waitJS(student, "connected", `document.getElementById("connection").textContent === "Connected"`)
	waitJS(student, "the section closed", `document.getElementById("diagram-toggle").getAttribute("aria-expanded") === "false" && document.getElementById("diagram-panel").hidden`)
	student.click("diagram-toggle")
	empty := student.diagram("diagram-box", "diagram-status", "the empty diagram", func(v diagramView) bool { return v.Title != "" })
	if len(empty.Sends) != 0 || len(empty.Arrivals) != 0 || !empty.Labelled {
		t.Errorf("the new session's diagram: %v", empty)
	}
	seedStepsInPage(newLab(student))
	v := student.diagram("diagram-box", "diagram-status", "the nine steps drawn", complete)
	if v.Title != "Session diagram" || !v.Labelled || v.Status != "" || !v.Scrolls || v.PageWide {
		t.Errorf("the student's diagram at 1280 px: %v", v)
	}
	for _, word := range []string{"8 runs", "16 messages were queued and 17 deliveries were made", "Message 16, a reply from run-8, delivered in run-8: accepted."} {
		if !strings.Contains(v.Desc, word) {
			t.Errorf("the description has no %q: %s", word, v.Desc)
		}
	}
	axeCheck(student, src, "student page with its diagram at 1280 px")
	shoot := screenshots(t)
	shoot(student, "diagram-student.png", 1280, 900, `document.getElementById("diagram").scrollIntoView()`, false)

	student.do("a 360 px phone", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	phone := student.diagram("diagram-box", "diagram-status", "the diagram at 360 px", func(v diagramView) bool { return complete(v) && v.Scrolls && !v.PageWide })
	if phone.Desc != v.Desc {
		t.Errorf("the phone's diagram differs: %v", phone)
	}
	axeCheck(student, src, "student page with its diagram at 360 px")
	shoot(student, "diagram-student-360.png", 360, 740, `document.getElementById("diagram").scrollIntoView()`, true)

	// The console's watched session.
	teacher := student.newPrivateTab("teacher")
	loginTab(teacher, ts.URL)
	teacher.do("watch the student in the class console", chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"?watch="+id))
	c := teacher.diagram("w-diagram", "w-diagram-status", "the watched session's diagram", complete)
	if c.Desc != v.Desc || c.Title != v.Title || c.Width != v.Width || !c.Labelled {
		t.Errorf("the console's diagram differs from the student's:\n%v\n%v", c, v)
	}
	// The misconception chart: a bar per kind predicted, its numbers as text.
	chart := evalJS[[]string](teacher, `[...document.querySelectorAll("#misconception-chart > g")].map((g) => g.dataset.kind + ": " + g.querySelector(".bar-numbers").textContent)`)
	if want := []string{"staleReply: 0 right, 1 wrong", "deadline: 1 right, 0 wrong", "matchingReply: 1 right, 0 wrong"}; !slices.Equal(chart, want) {
		t.Errorf("the chart's bars %q, want %q", chart, want)
	}
	if desc := evalJS[string](teacher, `document.querySelector("#misconception-chart > desc").textContent`); !strings.Contains(desc, "a stale reply: 0 right, 1 wrong, of 1 prediction") {
		t.Errorf("the chart's description %q", desc)
	}
	waitJS(teacher, "the debrief link", `!document.getElementById("watched-debrief").hidden`)
	axeCheck(teacher, src, "console with the watched session's diagram and the chart")
	shoot(teacher, "diagram-console.png", 1280, 900, `document.getElementById("w-diagram").scrollIntoView({ block: "center" })`, false)

	// The projector's debrief: large, no name until shown.
	teacher.do("open the debrief", chromedp.Navigate(ts.URL+"/instructor/classes/"+cl.ID+"/projector?session="+id))
	d := teacher.diagram("debrief-diagram", "debrief-status", "the debrief's diagram", complete)
	if d.Desc != v.Desc || d.Title != "Session diagram" || d.Width != 1.75*v.Width || !d.Labelled {
		t.Errorf("the debrief's diagram: %v (the student's width %v)", d, v.Width)
	}
	if who := evalJS[string](teacher, `document.getElementById("debrief-heading").textContent + "|" + document.getElementById("code").checkVisibility()`); who != "Debrief: a student's session|false" {
		t.Errorf("the debrief's heading and the join screen: %q", who)
	}
	axeCheck(teacher, src, "projector's debrief")
	shoot(teacher, "diagram-projector.png", 1280, 800, `window.scrollTo(0, 0)`, false)
	teacher.click("debrief-names")
	teacher.diagram("debrief-diagram", "debrief-status", "the name shown", func(v diagramView) bool {
		return complete(v) && v.Title == "Session diagram of Ada"
	})
	waitJS(teacher, "the name in the heading", `document.getElementById("debrief-heading").textContent === "Debrief: Ada" &&
		document.getElementById("debrief-names").getAttribute("aria-pressed") === "true"`)
	teacher.click("debrief-names")
	teacher.diagram("debrief-diagram", "debrief-status", "the name hidden again", func(v diagramView) bool {
		return complete(v) && v.Title == "Session diagram"
	})
}

// screenshots returns what writes a page's picture to docs/ when
// LAB_SCREENSHOT=1, and does nothing otherwise.
func screenshots(t *testing.T) func(p *tab, file string, w, h int64, scroll string, mobile bool) {
	on := os.Getenv("LAB_SCREENSHOT") == "1"
	return func(p *tab, file string, w, h int64, scroll string, mobile bool) {
		t.Helper()
		if !on {
			return
		}
		viewport := chromedp.EmulateViewport(w, h)
		if mobile {
			viewport = chromedp.EmulateViewport(w, h, chromedp.EmulateMobile)
		}
		p.do("frame "+file, viewport,
			chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur(); `+scroll),
			chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
		png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join("..", "docs", file)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
	}
}
