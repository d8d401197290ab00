package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolcall-lab/lab/server"
	"github.com/toolcall-lab/lab/store/sqlite"
)

// The texts the page shows, from the seed's model and the student protocol.
const (
	seedReady            = "Ready. Queue a reply or a local deadline observation."
	seedStarted          = "Started a new run. Older messages remain queued."
	seedCompleted        = "Accepted completion."
	seedRejected         = "Accepted rejection."
	seedOtherCall        = "Ignored reply: different call identity."
	seedFinal            = "Ignored reply: final outcome already recorded."
	seedUnresolved       = "Unresolved: deadline observed without a final reply."
	seedStill            = "Still unresolved: no final reply."
	seedDeadlineCall     = "Ignored deadline: different call identity."
	seedDeadlineDone     = "Ignored deadline: final outcome already recorded."
	seedBadJSON          = "Invalid JSON: could not parse message."
	seedBadShape         = "Invalid reply: expected string identifiers and a completed output or rejected reason."
	seedUnresolvedDetail = "No final reply observed. A matching late reply can still resolve this call."
)

// draftFor is the default completion the server offers for a run.
func draftFor(run string) string {
	return `{"runId":"` + run + `","callId":"lookup","kind":"completed","output":"Answer for ` + run + `"}`
}

// startLab serves a fresh lab server for the test and returns its base URL.
func startLab(t *testing.T) string {
	t.Helper()
	return startLabWith(t, server.Config{})
}

// startLabWith is startLab with a configuration.
func startLabWith(t *testing.T, cfg server.Config) string {
	t.Helper()
	srv := startServer(t, cfg)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(func() { stopLab(t, srv) })
	return ts.URL
}

func stopLab(t *testing.T, srv *server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), browserTestTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// pageView is what a student sees, read from the DOM.
type pageView struct {
	Connection string       `json:"connection"`
	Error      string       `json:"error"`
	Session    string       `json:"session"`
	RunID      string       `json:"runId"`
	CallID     string       `json:"callId"`
	Status     string       `json:"status"`
	Detail     string       `json:"detail"`
	Notice     string       `json:"notice"`
	Reply      string       `json:"reply"`
	Queue      []queuedView `json:"queue"`
	Receipts   []string     `json:"receipts"`  // in arrival order (the page shows them newest first)
	ByTeacher  []bool       `json:"byTeacher"` // per receipt: marked "by instructor"
	Focus      string       `json:"focus"`
	Feedback   string       `json:"feedback"`
	Note       string       `json:"note"` // the instructor note
	Check      string       `json:"check"`
	Where      string       `json:"where"`
}

type queuedView struct {
	Label      string `json:"label"`
	Button     string `json:"button"`
	Instructor bool   `json:"instructor"`
	Delivered  bool   `json:"delivered"` // shown under "Delivered", not "Waiting"
}

func (v pageView) labels() []string {
	var out []string
	for _, q := range v.Queue {
		out = append(out, q.Label)
	}
	return out
}

func (v pageView) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "connection %q, error %q, session %q, focus %q\n", v.Connection, v.Error, v.Session, v.Focus)
	fmt.Fprintf(&b, "call %s/%s %q detail %q\nnotice %q\nreply %q\n", v.RunID, v.CallID, v.Status, v.Detail, v.Notice, v.Reply)
	fmt.Fprintf(&b, "check %q %q\nfeedback %q\ninstructor note %q\n", v.Check, v.Where, v.Feedback, v.Note)
	for _, q := range v.Queue {
		fmt.Fprintf(&b, "  held %q [%s] instructor=%v\n", q.Label, q.Button, q.Instructor)
	}
	for _, r := range v.Receipts {
		fmt.Fprintf(&b, "  receipt %q\n", r)
	}
	return b.String()
}

// viewJS reads a pageView. The focus is named by id, or by the message of a
// Deliver button, so a test can tell which control has it.
const viewJS = `(() => {
	const text = (id) => document.getElementById(id).textContent;
	const a = document.activeElement;
	let focus = "";
	if (a && a !== document.body) {
		focus = a.id || (a.dataset.messageId ? "deliver-" + a.dataset.messageId : a.tagName.toLowerCase());
	}
	// Held messages in id order, whichever list (waiting or delivered) shows them.
	const held = [...document.querySelectorAll("#queue > li, #delivered > li")]
		.sort((x, y) => Number(x.dataset.messageId) - Number(y.dataset.messageId));
	const receipts = [...document.querySelectorAll("#receipts > li")].reverse();
	return {
		connection: text("connection"), error: text("error"), session: text("session-id"),
		runId: text("run-id"), callId: text("call-id"), status: text("status"),
		detail: text("detail"), notice: text("notice"),
		reply: document.getElementById("reply").value,
		queue: held.map((li) => ({
			label: li.querySelector("p").textContent,
			button: li.querySelector("button").textContent,
			instructor: li.classList.contains("from-instructor"),
			delivered: li.parentElement.id === "delivered",
		})),
		receipts: receipts.map((li) => li.querySelector(".receipt-notice").textContent),
		byTeacher: receipts.map((li) => li.classList.contains("by-instructor") && !li.querySelector(".origin").hidden),
		focus, feedback: text("feedback"), note: text("instructor-note"),
		check: text("reply-check"), where: text("reply-where"),
	};
})()`

func (p *tab) view() (pageView, error) { return p.viewIn(p.ctx) }

func (p *tab) viewIn(ctx context.Context) (pageView, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[pageView](viewJS))
}

// waitView waits until the page shows a view that ok accepts.
func (p *tab) waitView(what string, ok func(pageView) bool) pageView {
	p.t.Helper()
	return waitUntil(p, what, p.viewIn, ok)
}

// open loads url and waits until the page is connected and shows a state.
func (p *tab) open(url string) pageView {
	p.t.Helper()
	p.do("open "+url, chromedp.Navigate(url))
	return p.waitView("the first state", func(v pageView) bool {
		return v.Connection == "Connected" && v.Status != "Loading…" && v.RunID != ""
	})
}

func (p *tab) click(id string) {
	p.t.Helper()
	p.do("click #"+id, chromedp.Click(chromedp.ID(id)))
}

func (p *tab) deliver(n int) {
	p.t.Helper()
	sel := fmt.Sprintf(`:is(#queue, #delivered) button[data-message-id="%d"]`, n)
	p.do("click Deliver message "+strconv.Itoa(n), chromedp.Click(chromedp.CSS(sel)))
}

// typeReply replaces the reply box's text as a student would: click into it,
// select everything with Ctrl+A, and type over the selection.
func (p *tab) typeReply(text string) {
	p.t.Helper()
	p.do("type a reply", p.selectReply(), chromedp.KeyEvent(text))
	p.waitView("the typed reply", func(v pageView) bool { return v.Reply == text })
}

// pasteReply replaces the reply box's text through the browser's text
// insertion (as a paste or an input method does: the same editing path and
// input events as typing, in one protocol call). Typing every JSON reply key
// by key would cost thousands of round trips and push the walkthrough past
// its time budget on a loaded machine.
func (p *tab) pasteReply(text string) {
	p.t.Helper()
	p.do("paste a reply", p.selectReply(), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return err
	}))
	p.waitView("the pasted reply", func(v pageView) bool { return v.Reply == text })
}

func (p *tab) selectReply() chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Click(chromedp.ID("reply")),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
}

// editReplyEnd edits the end of the reply box by key: Ctrl+End, Backspace
// over the last n characters, then type tail.
func (p *tab) editReplyEnd(n int, tail string) {
	p.t.Helper()
	p.do("edit the reply",
		chromedp.Click(chromedp.ID("reply")),
		chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.KeyEvent(strings.Repeat(kb.Backspace, n)),
		chromedp.KeyEvent(tail),
	)
}

// expectedLab is the expected state of one session; walkthrough steps update it and
// then wait until the page shows exactly that.
type expectedLab struct {
	p        *tab
	run      int
	status   string
	detail   string
	notice   string
	queue    []string
	receipts []string
}

func newLab(p *tab) *expectedLab {
	return &expectedLab{p: p, run: 1, status: "Pending", notice: seedReady}
}

func (l *expectedLab) runID() string { return "run-" + strconv.Itoa(l.run) }

func (l *expectedLab) matches(v pageView) bool {
	return v.RunID == l.runID() && v.CallID == "lookup" && v.Status == l.status &&
		v.Detail == l.detail && v.Notice == l.notice &&
		slices.Equal(v.labels(), l.queue) && slices.Equal(v.Receipts, l.receipts)
}

// expect waits until the acting tab shows the expected state.
func (l *expectedLab) expect(step string) pageView {
	l.p.t.Helper()
	return l.expectIn(l.p, step)
}

// expectIn waits until tab p shows the expected state.
func (l *expectedLab) expectIn(p *tab, step string) pageView {
	p.t.Helper()
	return p.waitView(fmt.Sprintf("%s: %s %s %q, notice %q, %d held, %d receipts",
		step, l.runID(), l.status, l.detail, l.notice, len(l.queue), len(l.receipts)), l.matches)
}

func (l *expectedLab) start(step string) {
	l.p.t.Helper()
	// A start holds the button off for a moment (a double click starts one
	// run), so a quick test waits for it as a student would.
	waitStartReady(l.p, step)
	l.p.click("start")
	l.run++
	l.status, l.detail, l.notice = "Pending", "", seedStarted
	l.expect(step)
	// The seed refills the reply with the new run's default completion.
	l.p.waitView(step+": the new run's draft", func(v pageView) bool { return v.Reply == draftFor(l.runID()) })
}

// waitStartReady waits until "Start new run" takes a click again.
func waitStartReady(p *tab, step string) {
	p.t.Helper()
	waitJS(p, step+": Start new run ready", `!document.getElementById("start").hasAttribute("aria-disabled")`)
}

// queuePasted puts raw into the reply box and queues it.
func (l *expectedLab) queuePasted(step, raw string) {
	l.p.t.Helper()
	l.p.pasteReply(raw)
	l.queueShown(step, raw)
}

// queueTyped types raw into the reply box key by key and queues it.
func (l *expectedLab) queueTyped(step, raw string) {
	l.p.t.Helper()
	l.p.typeReply(raw)
	l.queueShown(step, raw)
}

// queueOutput edits the output of the reply box's default completion by key,
// as the seed's steps 1 and 2 ask, and queues the result.
func (l *expectedLab) queueOutput(step, output string) {
	l.p.t.Helper()
	draft := draftFor(l.runID())
	old := "Answer for " + l.runID() + `"}`
	raw := strings.TrimSuffix(draft, old) + output + `"}`
	l.p.editReplyEnd(len(old), output+`"}`)
	l.p.waitView(step+": the edited reply", func(v pageView) bool { return v.Reply == raw })
	l.queueShown(step, raw)
}

// queueShown queues whatever the reply box holds, which must be raw.
func (l *expectedLab) queueShown(step, raw string) {
	l.p.t.Helper()
	l.p.click("queue-reply")
	l.queue = append(l.queue, fmt.Sprintf("Message %d: %s", l.nextNumber(), raw))
	l.expect(step)
}

// nextNumber is the number the page gives the student's next message: the
// student's own count (the instructor's are I1, I2, …).
func (l *expectedLab) nextNumber() int {
	n := 1
	for _, label := range l.queue {
		if !strings.HasPrefix(label, "Message I") {
			n++
		}
	}
	return n
}

func (l *expectedLab) queueDeadline(step string) {
	l.p.t.Helper()
	l.p.click("queue-deadline")
	l.queue = append(l.queue, fmt.Sprintf("Message %d: Deadline for %s/lookup", l.nextNumber(), l.runID()))
	l.expect(step)
}

// deliver delivers message n and expects the call to show status and detail
// afterwards, with notice as both the notice and the receipt.
func (l *expectedLab) deliver(step string, n int, notice, status, detail string) {
	l.p.t.Helper()
	l.deliverAs(step, n, strconv.Itoa(n), notice, status, detail)
}

// deliverAs delivers the message with id n, which the page numbers number
// (the student's own count, or I1, I2, … for the instructor's).
func (l *expectedLab) deliverAs(step string, n int, number, notice, status, detail string) {
	l.p.t.Helper()
	l.p.deliver(n)
	l.status, l.detail, l.notice = status, detail, notice
	l.receipts = append(l.receipts, fmt.Sprintf("Delivered message %s: %s", number, notice))
	l.expect(step)
}

// TestBrowserSeedWalkthrough drives the seed's "Try delayed and reordered
// replies" steps through the page with real clicks and typing.
func TestBrowserSeedWalkthrough(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	first := p.open(base + "/")
	if first.Reply != draftFor("run-1") {
		t.Errorf("reply box after load = %q, want the run-1 draft", first.Reply)
	}
	l := newLab(p)
	l.expect("initial state")

	// 1. Hold an answer for run-1; the call stays Pending.
	l.queueOutput("step 1", "Old answer")

	// 2. A new run; its answer arrives first.
	l.start("step 2: start run-2")
	l.queueOutput("step 2", "New answer")
	l.deliver("step 2: deliver 2", 2, seedCompleted, "Completed", "New answer")

	// 3. The older run's answer arrives late and is ignored.
	l.deliver("step 3: deliver 1", 1, seedOtherCall, "Completed", "New answer")

	// 4. Duplicates and contradictions after a final outcome are ignored.
	l.deliver("step 4: deliver 2 again", 2, seedFinal, "Completed", "New answer")
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"completed","output":"Another answer"}`)
	l.deliver("step 4: deliver 3", 3, seedFinal, "Completed", "New answer")
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Changed my mind"}`)
	l.deliver("step 4: deliver 4", 4, seedFinal, "Completed", "New answer")

	// 5. A deadline first leaves the call Unresolved; the late completion
	// still resolves it.
	l.start("step 5: start run-3")
	l.queueDeadline("step 5")
	l.queueShown("step 5: default completion", draftFor("run-3"))
	l.deliver("step 5: deliver the deadline", 5, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 5: deliver the completion", 6, seedCompleted, "Completed", "Answer for run-3")

	// 6. The same with an explicit rejection; a repeated deadline changes
	// nothing.
	l.start("step 6: start run-4")
	l.queueDeadline("step 6")
	l.queuePasted("step 6", `{"runId":"run-4","callId":"lookup","kind":"rejected","reason":"The query is empty"}`)
	l.deliver("step 6: deliver the deadline", 7, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 6: deliver the deadline again", 7, seedStill, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 6: deliver the rejection", 8, seedRejected, "Rejected", "The query is empty")

	// 7. A deadline cannot erase a result, nor touch a newer run.
	l.start("step 7: start run-5")
	l.queueDeadline("step 7")
	l.queueShown("step 7: default completion", draftFor("run-5"))
	l.deliver("step 7: deliver the completion", 10, seedCompleted, "Completed", "Answer for run-5")
	l.deliver("step 7: deliver the deadline", 9, seedDeadlineDone, "Completed", "Answer for run-5")
	l.queueDeadline("step 7: another deadline")
	l.start("step 7: start run-6")
	l.deliver("step 7: deliver the old deadline", 11, seedDeadlineCall, "Pending", "")

	// 8. Wrong call id, broken JSON and a wrong shape are diagnostics, not
	// outcomes.
	l.queuePasted("step 8", `{"runId":"run-6","callId":"search","kind":"completed","output":"Wrong call"}`)
	l.deliver("step 8: another callId", 12, seedOtherCall, "Pending", "")
	l.queueTyped("step 8", `{`)
	l.deliver("step 8: broken JSON", 13, seedBadJSON, "Pending", "")
	l.queuePasted("step 8", `{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`)
	l.deliver("step 8: numeric output", 14, seedBadShape, "Pending", "")

	// 9. An empty output is still a completion; markup stays text.
	l.start("step 9: start run-7")
	l.queuePasted("step 9", `{"runId":"run-7","callId":"lookup","kind":"completed","output":""}`)
	l.deliver("step 9: empty output", 15, seedCompleted, "Completed", "")
	l.start("step 9: start run-8")
	l.queuePasted("step 9", `{"runId":"run-8","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`)
	l.deliver("step 9: markup output", 16, seedCompleted, "Completed", "<strong>Found it</strong>")
	if n := evalJS[int](p, `document.querySelectorAll("strong").length`); n != 0 {
		t.Errorf("the page has %d strong elements; the output must stay text", n)
	}
}

// TestBrowserSecondTabFollowsLive opens the same session in two tabs: each
// sees the other's changes, and an untouched reply draft follows the run.
func TestBrowserSecondTabFollowsLive(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	a := newBrowser(t)
	a.open(base + "/")
	url := evalJS[string](a, `location.href`)
	b := a.newTab("tab 2")
	b.open(url)

	// One expected state for the session; each step names the tab that
	// acts, and then both tabs must show it.
	l := newLab(a)
	l.queuePasted("tab 1 queues a reply", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Old answer"}`)
	l.expectIn(b, "tab 2 sees the held reply")

	// Tab 1 starts a run: tab 2's draft was never edited, so it follows.
	l.start("tab 1 starts run-2")
	l.expectIn(b, "tab 2 sees run-2")
	b.waitView("tab 2's untouched draft follows the run", func(v pageView) bool { return v.Reply == draftFor("run-2") })

	// Tab 2 delivers; tab 1 sees the receipt.
	l.p = b
	l.deliver("tab 2 delivers message 1", 1, seedOtherCall, "Pending", "")
	l.expectIn(a, "tab 1 sees tab 2's delivery")

	// A draft that the student edited is never overwritten by another tab.
	const edited = `{"edited":true}`
	b.typeReply(edited)
	l.p = a
	l.start("tab 1 starts run-3")
	if v := l.expectIn(b, "tab 2 sees run-3"); v.Reply != edited {
		t.Errorf("tab 2's edited reply became %q; another tab's start must not overwrite it", v.Reply)
	}
}

// TestBrowserReloadResumesSession reloads the page and expects the same
// session and state, because the address holds the session id.
func TestBrowserReloadResumesSession(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	before := p.open(base + "/")
	l := newLab(p)
	l.queueDeadline("queue a deadline")
	l.start("start run-2")
	l.deliver("deliver the old deadline", 1, seedDeadlineCall, "Pending", "")
	p.typeReply(`{"draft":"edited before the reload"}`)

	p.do("reload", chromedp.Reload())
	after := p.waitView("the state after the reload", func(v pageView) bool {
		return v.Connection == "Connected" && l.matches(v)
	})
	if after.Session != before.Session || after.Session == "" {
		t.Errorf("session after reload = %q, before = %q", after.Session, before.Session)
	}
	// A reload is a new page load: the reply box starts from the draft.
	if after.Reply != draftFor("run-2") {
		t.Errorf("reply after reload = %q, want the run-2 draft", after.Reply)
	}
}

// TestBrowserMarkupIsShownLiterally checks that server text is only ever
// text: markup in a reply shows its tags and creates no elements.
func TestBrowserMarkupIsShownLiterally(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	l := newLab(p)
	markup := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`
	l.queuePasted("queue markup", markup)
	held := `<img src="/static/missing.png" alt="held"> <em>held</em>`
	l.queuePasted("queue a held message with markup", held)
	l.deliver("deliver markup", 1, seedCompleted, "Completed", "<strong>Found it</strong>")

	for sel, want := range map[string]int{"strong": 0, "em": 0, "img": 0} {
		if n := evalJS[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n != want {
			t.Errorf("the page has %d %s elements, want %d", n, sel, want)
		}
	}
	if got := evalJS[string](p, `document.getElementById("detail").textContent`); got != "<strong>Found it</strong>" {
		t.Errorf("detail text = %q", got)
	}
}

// TestBrowserKeyboardDeliverKeepsFocus presses Enter twice on a focused
// Deliver button: both presses deliver, and the re-render in between keeps
// the very same element focused.
func TestBrowserKeyboardDeliverKeepsFocus(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	l := newLab(p)
	l.queueDeadline("queue a deadline")

	// Reach the button with Tab from the start button, through every
	// control in order, as a keyboard user would.
	p.do("focus Start new run", chromedp.Focus(chromedp.ID("start")))
	// The exercise panel's disclosure button comes first, then the
	// practice's button (issue 53); the prediction choice (one
	// stop for its radio group) comes before the Deliver buttons, as a
	// student predicts and then delivers.
	for _, want := range []string{"exercise-toggle", "practice-draw", "reply", "queue-reply", "queue-deadline", "reset-reply", "predict-none", "deliver-1"} {
		p.do("press Tab", chromedp.KeyEvent("\t"))
		p.waitView("focus on "+want, func(v pageView) bool { return v.Focus == want })
	}
	// Mark the element, so that a re-created button (which would have
	// lost the mark) cannot pass for the same one.
	evalJS[chromedp.Void](p, `document.activeElement.labProbe = "same element"`)
	sameFocus := func(step string) {
		t.Helper()
		if got := evalJS[string](p, `String(document.activeElement.labProbe)`); got != "same element" {
			t.Errorf("%s: the focused element is not the Deliver button that had focus (%q)", step, got)
		}
	}

	p.do("press Enter", chromedp.KeyEvent("\r"))
	l.status, l.detail, l.notice = "Unresolved", seedUnresolvedDetail, seedUnresolved
	l.receipts = append(l.receipts, "Delivered message 1: "+seedUnresolved)
	l.expect("first Enter")
	sameFocus("after the first Enter")

	p.do("press Enter again", chromedp.KeyEvent("\r"))
	l.notice = seedStill
	l.receipts = append(l.receipts, "Delivered message 1: "+seedStill)
	l.expect("second Enter")
	sameFocus("after the second Enter")
}

// switchHandler serves through whichever lab server is current, and holds
// requests while there is none, like a server that is restarting but whose
// port stays bound. Holding (rather than refusing) keeps the browser from
// logging failed connections as console errors.
type switchHandler struct {
	mu    sync.Mutex
	h     http.Handler
	ready chan struct{} // closed when h is set again
}

func (s *switchHandler) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h, s.ready = nil, make(chan struct{})
}

func (s *switchHandler) serve(h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.h = h
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
}

func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for {
		s.mu.Lock()
		h, ready := s.h, s.ready
		s.mu.Unlock()
		if h != nil {
			h.ServeHTTP(w, r)
			return
		}
		select {
		case <-ready:
		case <-r.Context().Done():
			return
		}
	}
}

// TestBrowserReconnectsAfterServerRestart restarts the server under an open
// page, as SIGTERM and a new process on the same data would: the page says it
// is reconnecting, refuses to silently drop a click meanwhile, and comes back
// to Connected showing its session as it was.
func TestBrowserReconnectsAfterServerRestart(t *testing.T) {
	t.Parallel()
	// Both servers share one event log, as a restarted process shares its
	// data file, so the page must come back to the state it left.
	data := filepath.Join(t.TempDir(), "lab.db")
	open := func() (*server.Server, *sqlite.Store) {
		st, err := sqlite.Open(data, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := startServer(t, server.Config{Store: st})
		return srv, st
	}
	first, firstStore := open()
	firstDown := false
	sw := &switchHandler{h: first.Handler()}
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if !firstDown {
			stopLab(t, first)
			firstStore.Close()
		}
	})

	p := newBrowser(t)
	p.open(ts.URL + "/")
	l := newLab(p)
	l.start("start run-2")
	l.queueDeadline("queue a deadline")

	// What SIGTERM does: close every page with 1012 (service restart), then
	// finish writing the store.
	sw.hold()
	ctx, cancel := context.WithTimeout(context.Background(), browserTestTimeout)
	defer cancel()
	if err := first.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := firstStore.Close(); err != nil {
		t.Fatal(err)
	}
	firstDown = true
	p.waitView("the reconnecting indicator", func(v pageView) bool {
		return strings.HasPrefix(v.Connection, "Reconnecting")
	})
	p.click("queue-deadline")
	p.waitView("the not-sent message", func(v pageView) bool {
		return strings.Contains(v.Error, "not sent") && strings.Contains(v.Error, "Queue deadline")
	})

	second, secondStore := open()
	t.Cleanup(func() { stopLab(t, second); secondStore.Close() })
	sw.serve(second.Handler())

	// The same session, as it was: run-2 with its held deadline; being
	// connected again makes "Not connected" untrue, so it goes by itself
	// (it would otherwise stay longer than this wait).
	p.waitView("the restored session", func(v pageView) bool {
		return v.Connection == "Connected" && l.matches(v)
	})
	p.waitView("the not-sent message cleared by reconnecting", func(v pageView) bool { return v.Error == "" })
	// The page works again, and a successful action clears the old message.
	l.queueDeadline("queue a deadline on the new server")
	p.waitView("the not-sent message cleared", func(v pageView) bool { return v.Error == "" })
}

// TestBrowserPhoneWidthHasNoHorizontalScroll lays the page out at 360 px with
// long unbroken text: nothing may scroll sideways, and every button keeps a
// 44 px touch target.
func TestBrowserPhoneWidthHasNoHorizontalScroll(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	p.open(base + "/")
	l := newLab(p)

	long := strings.Repeat("W", 300)
	raw := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"` + long + `"}`
	// Setting the value directly: typing 380 keys would only slow the test.
	p.do("fill the reply", chromedp.SetValue(chromedp.ID("reply"), raw))
	l.queueShown("queue a long reply", raw)
	l.queueDeadline("queue a deadline")
	l.deliver("deliver the long reply", 1, seedCompleted, "Completed", long)

	if w := evalJS[int](p, `document.scrollingElement.scrollWidth`); w > 360 {
		t.Errorf("scrollWidth = %d at a 360 px viewport; the page scrolls sideways", w)
	}
	// Controls that are not rendered (the closed dialog's, the skip links
	// until focused) are not touch targets.
	small := evalJS[[]string](p, `[...document.querySelectorAll("button, a")]
		.filter((e) => e.getClientRects().length > 0 && !e.closest(".skip-links"))
		.filter((e) => e.getBoundingClientRect().height < 44)
		.map((e) => e.textContent + " " + e.getBoundingClientRect().height)`)
	if len(small) > 0 {
		t.Errorf("controls under 44 px tall: %q", small)
	}
}

// TestBrowserShowsServerErrors sends a reply over the protocol's size limit:
// the server's error frame is shown in the alert region, nothing is queued,
// and the next successful action clears the message.
func TestBrowserShowsServerErrors(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	l := newLab(p)

	tooLong := strings.Repeat("x", 64<<10+1)
	p.do("fill the reply", chromedp.SetValue(chromedp.ID("reply"), tooLong))
	p.click("queue-reply")
	v := p.waitView("the error", func(v pageView) bool { return v.Error != "" })
	if len(v.Queue) != 0 {
		t.Errorf("a refused reply was queued: %v", v.labels())
	}
	if role := evalJS[string](p, `document.getElementById("error").getAttribute("role")`); role != "alert" {
		t.Errorf("#error role = %q, want alert", role)
	}
	if visible := evalJS[bool](p, `document.getElementById("error").getBoundingClientRect().height > 0`); !visible {
		t.Error("the error is not visible")
	}

	l.queueDeadline("queue a deadline")
	p.waitView("the error cleared", func(v pageView) bool { return v.Error == "" })

	// A frame over the protocol's 1 MiB hard cap would make the server drop
	// the connection; the page refuses to send it and stays connected.
	p.do("fill the reply", chromedp.SetValue(chromedp.ID("reply"), strings.Repeat("x", 1<<20)))
	p.click("queue-reply")
	p.waitView("the not-sent message", func(v pageView) bool { return strings.HasPrefix(v.Error, "Not sent") })
	l.queueDeadline("queue another deadline")
	if v, err := p.view(); err != nil || v.Connection != "Connected" {
		t.Errorf("connection after refusing a huge reply = %q (%v), want Connected", v.Connection, err)
	}
}
