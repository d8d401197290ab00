package server_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// TestBrowserScreenshots writes the README's pictures (LAB_SCREENSHOT=1):
// the student page at 1280 px and at 360 px, and the console, with a class of
// five. It asserts nothing beyond what the other tests do; it only draws.
func TestBrowserScreenshots(t *testing.T) {
	if os.Getenv("LAB_SCREENSHOT") != "1" {
		t.Skip("set LAB_SCREENSHOT=1 to write docs/screenshot.png, docs/screenshot-360.png and docs/instructor.png")
	}
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	first := newBrowser(t)
	var ada *tab
	var adaID string
	for i, name := range []string{"Ada", "Bob", "Chen", "Dana", "Eli"} {
		p := first
		if i > 0 {
			p = first.newTab(name)
		}
		id := p.open(base + "/").Session
		p.do("name", chromedp.SetValue(chromedp.ID("name"), name), chromedp.Click(chromedp.ID("set-name")))
		l := newLab(p)
		l.queueOutput("step 1", "Old answer")
		if i%2 == 0 {
			l.start("step 2")
			l.queueOutput("step 2", "New answer")
			l.deliver("step 2", 2, seedCompleted, "Completed", "New answer")
		}
		if i == 0 {
			ada, adaID = p, id
			l.deliver("step 3", 1, seedOtherCall, "Completed", "New answer")
			l.queueDeadline("a deadline")
		}
	}
	teacher := first.newTab("teacher")
	teacher.openConsole(base, adaID)
	teacher.inject("hold a stale reply for Ada",
		chromedp.Click(chromedp.CSS(`#overview-body button.watch[data-session="`+adaID+`"]`)), "watched", "staleReply", "mode-hold")
	ada.waitView("the instructor's note", func(v pageView) bool { return v.Note != "" })
	ada.typeReply(`{"runId":"run-2","callId":"lookup",}`)

	shoot := func(p *tab, file string, w, h int64, scroll string, mobile bool) {
		t.Helper()
		viewport := chromedp.EmulateViewport(w, h)
		if mobile {
			viewport = chromedp.EmulateViewport(w, h, chromedp.EmulateMobile)
		}
		p.do("frame "+file, viewport,
			chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur(); `+scroll),
			// Park the mouse off every control so that none shows its hover colour.
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
	shoot(ada, "screenshot.png", 1280, 900, `window.scrollTo(0, 0)`, false)
	// On a phone, far down the page: the call is still in view.
	shoot(ada, "screenshot-360.png", 360, 740, `document.getElementById("held-heading").scrollIntoView()`, true)
	shoot(teacher, "instructor.png", 1280, 900, `window.scrollTo(0, 0)`, false)
}
