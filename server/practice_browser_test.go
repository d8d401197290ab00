package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// practiceView is the student page's practice section, read from the DOM.
type practiceView struct {
	Drawn, Kind, Why, Status, Result, Summary string
	DeliverDisabled, DrawHidden, Done         bool
	States                                    []string // each kind's words, in the row's order
}

const practiceJS = `(() => {
	const drawn = document.getElementById("practice-drawn");
	return {
		Drawn: drawn.hidden ? "" : document.getElementById("practice-deliver").textContent,
		Kind: drawn.dataset.kind || "",
		Why: document.getElementById("practice-why").textContent,
		Status: document.getElementById("status").textContent,
		Result: document.getElementById("practice-result").textContent,
		Summary: document.getElementById("mastery-heading").textContent,
		DeliverDisabled: document.getElementById("practice-deliver").disabled,
		DrawHidden: document.getElementById("practice-draw").hidden,
		Done: !document.getElementById("practice-done").hidden,
		States: [...document.querySelectorAll("#mastery > li")].map((li) => li.textContent),
	};
})()`

func (p *tab) practice() practiceView {
	p.t.Helper()
	return evalJS[practiceView](p, practiceJS)
}

// TestBrowserPractice does the student's side of practice, from the
// Practice button to "all mastered", at 360 px and at 1280 px: after a wrong
// prediction about a stale reply the first draw is a stale reply and says
// why; Deliver waits for a prediction; the row of kinds says in words which
// are mastered; axe finds nothing at the start, mid-way and at the end.
func TestBrowserPractice(t *testing.T) {
	t.Parallel()
	src := axeSource(t)
	base := startLabWith(t, server.Config{FrameRate: 1000, FrameBurst: 1000})
	for _, w := range []int64{360, 1280} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			p := newBrowserWithin(t, 3*browserTestTimeout)
			vp := chromedp.EmulateViewport(w, 800)
			if w == 360 {
				vp = chromedp.EmulateViewport(w, 740, chromedp.EmulateMobile)
			}
			p.do(fmt.Sprintf("viewport %d", w), vp)
			p.open(base + "/")
			l := newLab(p)
			// A wrong prediction about a stale reply.
			l.queueOutput("hold run-1's answer", "Old answer")
			l.start("start run-2")
			p.predict("accepted")
			l.deliver("deliver the stale reply", 1, seedOtherCall, "Pending", "")
			waitJS(p, "the row says the stale reply was wrong", `[...document.querySelectorAll("#mastery > li")].some((li) => li.textContent === "Stale replylast one wrong")`)
			axeCheck(p, src, fmt.Sprintf("practice before a draw at %d px", w))

			draws := 0
			for {
				v := p.practice()
				if v.Done {
					break
				}
				if draws > 30 {
					t.Fatalf("%d draws and not done: %+v", draws, v)
				}
				p.click("practice-draw")
				v = waitUntil(p, "a practice drawn", func(ctx context.Context) (practiceView, error) {
					return chromedp.Run(ctx, chromedp.Evaluate[practiceView](practiceJS))
				}, func(v practiceView) bool { return v.Drawn != "" && v.Kind != "" })
				draws++
				if !v.DeliverDisabled {
					t.Fatalf("draw %d: Deliver enabled before a prediction: %+v", draws, v)
				}
				if draws == 1 {
					want := "Why this one: You expected run-1's reply to be accepted after run-2 began (message 1)."
					if v.Kind != "staleReply" || v.Why != want {
						t.Fatalf("the first draw: %+v, want a stale reply because %q", v, want)
					}
					shot(p, fmt.Sprintf("practice-drawn-%d.png", w))
					axeCheck(p, src, fmt.Sprintf("a practice drawn at %d px", w))
				}
				if strings.Contains(strings.Join(v.States, "|"), kindNames[v.Kind]+"mastered") {
					t.Fatalf("drew %s, which the row says is mastered: %v", v.Kind, v.States)
				}
				p.click("practice-predict-" + rightWord(v.Kind, v.Status))
				waitJS(p, "Deliver enabled by the prediction", `!document.getElementById("practice-deliver").disabled`)
				p.click("practice-deliver")
				waitJS(p, "the practice delivered", `document.getElementById("practice-drawn").hidden && document.getElementById("practice-result").textContent.includes("you were right")`)
			}
			v := p.practice()
			if draws < 29 || !v.DrawHidden || v.Summary != "Kinds of message: 10 of 10 mastered" {
				t.Fatalf("after %d draws: %+v", draws, v)
			}
			for _, s := range v.States {
				if !strings.HasSuffix(s, "mastered ✓") {
					t.Fatalf("a kind not mastered in words: %v", v.States)
				}
			}
			shot(p, fmt.Sprintf("practice-done-%d.png", w))
			axeCheck(p, src, fmt.Sprintf("all mastered at %d px", w))
		})
	}
}

// kindNames are the row's names of the kinds (practice.js).
var kindNames = map[string]string{
	"matchingReply": "Matching reply", "staleReply": "Stale reply", "duplicate": "Duplicate",
	"contradictory": "Contradictory reply", "deadline": "Deadline", "lateReply": "Late reply",
	"staleDeadline": "Older run's deadline", "wrongCallId": "Wrong call id",
	"malformedJson": "Malformed JSON", "wrongShape": "Wrong shape",
}

// shot saves a screenshot of the page when LAB_PRACTICE_SHOTS names a
// directory, to look at how the section reads.
func shot(p *tab, name string) {
	dir := os.Getenv("LAB_PRACTICE_SHOTS")
	if dir == "" {
		return
	}
	p.do("scroll to the practice", chromedp.ScrollIntoView(chromedp.ID("practice")))
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
