package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolcall-lab/lab/server"
)

// exerciseView is the student page's exercise panel, read from the DOM.
type exerciseView struct {
	Done        []int    `json:"done"`
	Current     int      `json:"current"`
	Finished    bool     `json:"finished"`
	Hint        string   `json:"hint"`
	Summary     string   `json:"summary"`
	Predictions string   `json:"predictions"`
	Whys        []string `json:"whys"`
	Verdicts    []string `json:"verdicts"`
}

func (v exerciseView) String() string {
	type fields exerciseView
	return fmt.Sprintf("%+v", fields(v))
}

const exerciseJS = `(() => {
	const steps = [...document.querySelectorAll("#exercise-steps > li")];
	const current = steps.find((li) => li.dataset.status === "current");
	return {
		done: steps.filter((li) => li.dataset.status === "done").map((li) => Number(li.dataset.step)),
		current: current ? Number(current.dataset.step) : 0,
		finished: !document.getElementById("exercise-finished").hidden,
		hint: current && !current.querySelector(".hint").hidden ? current.querySelector(".hint").textContent : "",
		summary: document.getElementById("exercise-summary").textContent,
		predictions: document.getElementById("prediction-accuracy").textContent,
		// Receipts are shown newest first; read them in arrival order.
		whys: [...document.querySelectorAll("#receipts > li .why")].map((e) => e.textContent).reverse(),
		verdicts: [...document.querySelectorAll("#receipts > li .prediction")].map((e) => e.textContent).reverse(),
	};
})()`

func (p *tab) exercise(what string, ok func(exerciseView) bool) exerciseView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (exerciseView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[exerciseView](exerciseJS))
	}, ok)
}

// ticked waits until the panel shows exactly the steps done, in order, with
// the lowest step not done highlighted (and its hint), or the end marked.
func (p *tab) ticked(what string, done ...int) exerciseView {
	p.t.Helper()
	slices.Sort(done)
	current := 0
	for s := 1; s <= 9; s++ {
		if !slices.Contains(done, s) {
			current = s
			break
		}
	}
	return p.exercise(fmt.Sprintf("%s: steps %v ticked, step %d current", what, done, current), func(v exerciseView) bool {
		return slices.Equal(v.Done, done) && v.Current == current && v.Finished == (current == 0) &&
			(current == 0 || strings.HasPrefix(v.Hint, "Try: "))
	})
}

// predict chooses a prediction for the next delivery, as a student clicks it.
func (p *tab) predict(word string) {
	p.t.Helper()
	p.click("predict-" + word)
}

// TestBrowserExerciseSeedSteps does the seed's nine steps as its text words
// them, with real clicks and typing, and sees each step ticked when its
// last action is done (and not before).
func TestBrowserExerciseSeedSteps(t *testing.T) {
	t.Parallel()
	walkSeedSteps(t, false)
}

// TestBrowserExercisePhoneKeepsStepInView does the same nine steps at
// 360 × 740: at each step, with the reply box focused and with a Deliver
// button focused, the current step's task is inside the viewport.
func TestBrowserExercisePhoneKeepsStepInView(t *testing.T) {
	t.Parallel()
	walkSeedSteps(t, true)
}

// stepInView focuses the reply box, then a Deliver button (when one is
// held), as a student taps them, and fails unless the current step's task
// (the bar's #step-now) and the focused control are both in view, with the
// notices in at most a fifth of the screen.
func stepInView(p *tab, step int) {
	p.t.Helper()
	want := fmt.Sprintf("Step %d of 9: ", step)
	waitJS(p, "the bar names step "+fmt.Sprint(step), fmt.Sprintf(`document.getElementById("step-now").textContent.startsWith(%q)`, want))
	for _, sel := range []string{"#reply", "#queue button, #delivered button"} {
		got := evalJS[string](p, fmt.Sprintf(`(() => {
			const target = document.querySelector(%q);
			if (!target) return "none";
			target.focus();
			const inside = (e) => { const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; };
			const bar = document.getElementById("callbar").getBoundingClientRect();
			const r = target.getBoundingClientRect();
			const seen = r.bottom > bar.bottom && r.top < innerHeight;
			const notices = document.getElementById("notices").getBoundingClientRect().height;
			if (!inside(document.getElementById("step-now"))) return "the step's task is out of view";
			if (!seen) return "the focused control is hidden (top " + r.top + ", bar bottom " + bar.bottom + ")";
			if (notices > 148) return "notices take " + notices + " px";
			if (bar.height > innerHeight * 0.4) return "the bar takes " + bar.height + " px";
			return "ok";
		})()`, sel))
		if got != "ok" && got != "none" {
			p.t.Errorf("step %d, %s focused: %s", step, sel, got)
		}
	}
}

func walkSeedSteps(t *testing.T, phone bool) {
	base := startLab(t)
	p := newBrowser(t)
	if phone {
		p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	}
	p.open(base + "/")
	l := newLab(p)
	p.ticked("a new session")
	check := func(step int) {
		t.Helper()
		if phone {
			stepInView(p, step)
		}
	}

	// 1. Hold an answer for run-1; the call stays Pending.
	check(1)
	l.queueOutput("step 1", "Old answer")
	p.ticked("step 1", 1)

	check(2)
	// 2. A new run; its answer arrives first.
	l.start("step 2: start run-2")
	l.queueOutput("step 2", "New answer")
	p.ticked("step 2 before delivering", 1)
	l.deliver("step 2: deliver 2", 2, seedCompleted, "Completed", "New answer")
	p.ticked("step 2", 1, 2)

	check(3)
	// 3. The older run's answer arrives late and is ignored.
	l.deliver("step 3: deliver 1", 1, seedOtherCall, "Completed", "New answer")
	v := p.ticked("step 3", 1, 2, 3)
	if last := v.Whys[len(v.Whys)-1]; last != "Why: this reply is for run-1; the current call is run-2/lookup" {
		t.Errorf("step 3's explanation %q", last)
	}

	check(4)
	// 4. Duplicates and contradictions after a final outcome are ignored.
	l.deliver("step 4: deliver 2 again", 2, seedFinal, "Completed", "New answer")
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"completed","output":"Another answer"}`)
	l.deliver("step 4: deliver 3", 3, seedFinal, "Completed", "New answer")
	p.ticked("step 4 with two of three parts", 1, 2, 3)
	l.queuePasted("step 4", `{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"Changed my mind"}`)
	l.deliver("step 4: deliver 4", 4, seedFinal, "Completed", "New answer")
	p.ticked("step 4", 1, 2, 3, 4)

	check(5)
	// 5. A deadline first leaves the call Unresolved; the late completion
	// still resolves it.
	l.start("step 5: start run-3")
	l.queueDeadline("step 5")
	l.queueShown("step 5: default completion", draftFor("run-3"))
	l.deliver("step 5: deliver the deadline", 5, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 5: deliver the completion", 6, seedCompleted, "Completed", "Answer for run-3")
	p.ticked("step 5", 1, 2, 3, 4, 5)

	check(6)
	// 6. The same with an explicit rejection.
	l.start("step 6: start run-4")
	l.queueDeadline("step 6")
	l.queuePasted("step 6", `{"runId":"run-4","callId":"lookup","kind":"rejected","reason":"The query is empty"}`)
	l.deliver("step 6: deliver the deadline", 7, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("step 6: deliver the rejection", 8, seedRejected, "Rejected", "The query is empty")
	p.ticked("step 6", 1, 2, 3, 4, 5, 6)

	check(7)
	// 7. A deadline cannot erase a result, nor touch a newer run.
	l.start("step 7: start run-5")
	l.queueDeadline("step 7")
	l.queueShown("step 7: default completion", draftFor("run-5"))
	l.deliver("step 7: deliver the completion", 10, seedCompleted, "Completed", "Answer for run-5")
	l.deliver("step 7: deliver the deadline", 9, seedDeadlineDone, "Completed", "Answer for run-5")
	l.queueDeadline("step 7: another deadline")
	l.start("step 7: start run-6")
	l.deliver("step 7: deliver the old deadline", 11, seedDeadlineCall, "Pending", "")
	p.ticked("step 7", 1, 2, 3, 4, 5, 6, 7)

	check(8)
	// 8. Wrong call id, broken JSON and a wrong shape are diagnostics.
	l.queuePasted("step 8", `{"runId":"run-6","callId":"search","kind":"completed","output":"Wrong call"}`)
	l.deliver("step 8: another callId", 12, seedOtherCall, "Pending", "")
	l.queueTyped("step 8", `{`)
	l.deliver("step 8: broken JSON", 13, seedBadJSON, "Pending", "")
	l.queuePasted("step 8", `{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`)
	l.deliver("step 8: numeric output", 14, seedBadShape, "Pending", "")
	v = p.ticked("step 8", 1, 2, 3, 4, 5, 6, 7, 8)
	if why := v.Whys[len(v.Whys)-2]; !strings.HasPrefix(why, "Why: not valid JSON at position 1: expected ") {
		t.Errorf("broken JSON's explanation %q", why)
	}

	check(9)
	// 9. An empty output is still a completion; markup stays text.
	l.start("step 9: start run-7")
	l.queuePasted("step 9", `{"runId":"run-7","callId":"lookup","kind":"completed","output":""}`)
	l.deliver("step 9: empty output", 15, seedCompleted, "Completed", "")
	l.start("step 9: start run-8")
	l.queuePasted("step 9", `{"runId":"run-8","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`)
	l.deliver("step 9: markup output", 16, seedCompleted, "Completed", "<strong>Found it</strong>")
	v = p.ticked("all nine steps", 1, 2, 3, 4, 5, 6, 7, 8, 9)
	if v.Summary != "Exercise: all nine steps done" {
		t.Errorf("summary after all nine: %q", v.Summary)
	}
	if got := evalJS[string](p, `document.getElementById("step-now").textContent`); got != "All nine steps done." {
		t.Errorf("the bar says %q after all nine", got)
	}
}

// TestBrowserExerciseOtherOrder does the steps in another order, in other
// runs and with other message numbers: each ticks when what it teaches is
// done.
func TestBrowserExerciseOtherOrder(t *testing.T) {
	t.Parallel()
	base := startLab(t)
	p := newBrowser(t)
	p.open(base + "/")
	l := newLab(p)

	// Step 8 first, in run-1.
	l.queuePasted("8a", `{"runId":"run-1","callId":"search","kind":"completed","output":"x"}`)
	l.deliver("8a", 1, seedOtherCall, "Pending", "")
	l.queueTyped("8b", `{`)
	l.deliver("8b", 2, seedBadJSON, "Pending", "")
	l.queuePasted("8c", `{"runId":"run-1","callId":"lookup","kind":"completed"}`)
	l.deliver("8c", 3, seedBadShape, "Pending", "")
	p.ticked("step 8 first", 8)

	// 7b: an older run's deadline leaves the new call Pending.
	l.queueDeadline("7b")
	l.start("7b: run-2")
	l.deliver("7b", 4, seedDeadlineCall, "Pending", "")
	p.ticked("half of step 7", 8)

	// Steps 1, 2 and 9a with one message: an empty output for run-2.
	l.queuePasted("1", `{"runId":"run-2","callId":"lookup","kind":"completed","output":""}`)
	p.ticked("step 1", 1, 8)
	l.deliver("2 and 9a", 5, seedCompleted, "Completed", "")
	p.ticked("step 2", 1, 2, 8)

	// Step 4 in another order: the opposite kind, then another output, then
	// the same again; then 7a.
	l.queuePasted("4c", `{"runId":"run-2","callId":"lookup","kind":"rejected","reason":"no"}`)
	l.deliver("4c", 6, seedFinal, "Completed", "")
	l.queuePasted("4b", `{"runId":"run-2","callId":"lookup","kind":"completed","output":"other"}`)
	l.deliver("4b", 7, seedFinal, "Completed", "")
	l.deliver("4a", 5, seedFinal, "Completed", "")
	p.ticked("step 4", 1, 2, 4, 8)
	l.queueDeadline("7a")
	l.deliver("7a", 8, seedDeadlineDone, "Completed", "")
	p.ticked("step 7", 1, 2, 4, 7, 8)

	// Step 6 before step 5.
	l.start("6: run-3")
	l.queueDeadline("6")
	l.queuePasted("6", `{"runId":"run-3","callId":"lookup","kind":"rejected","reason":"Nothing found"}`)
	l.deliver("6: deadline", 9, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("6: rejection", 10, seedRejected, "Rejected", "Nothing found")
	p.ticked("step 6", 1, 2, 4, 6, 7, 8)

	// Step 5 with markup as the late output: 9b too.
	l.start("5: run-4")
	l.queueDeadline("5")
	l.queuePasted("5", `{"runId":"run-4","callId":"lookup","kind":"completed","output":"<b>late</b>"}`)
	l.deliver("5: deadline", 11, seedUnresolved, "Unresolved", seedUnresolvedDetail)
	l.deliver("5: late markup", 12, seedCompleted, "Completed", "<b>late</b>")
	p.ticked("steps 5 and 9", 1, 2, 4, 5, 6, 7, 8, 9)

	// Step 3 last: run-2's other output, delivered to run-4.
	l.deliver("3", 7, seedOtherCall, "Completed", "<b>late</b>")
	p.ticked("all nine", 1, 2, 3, 4, 5, 6, 7, 8, 9)
}

// TestBrowserExerciseInjectionBeforeStep2: the instructor holds a stale
// reply in the student's queue before step 2's own message; the student
// then follows step 2 as worded ("deliver message 2"), gets Completed / New
// answer, and step 2 ticks.
func TestBrowserExerciseInjectionBeforeStep2(t *testing.T) {
	t.Parallel()
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	id := p.open(base + "/").Session
	l := newLab(p)
	l.queueOutput("step 1", "Old answer")
	l.start("step 2: start run-2")

	req, err := http.NewRequest("POST", base+"/api/inject", strings.NewReader(`{"sessions":["`+id+`"],"preset":"staleReply"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("inject: %d", resp.StatusCode)
	}
	old := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"Old answer"}`
	l.queue = append(l.queue, "Message I1: "+old)
	l.expect("the instructor's message, held as I1")

	// The student's second message is "message 2", whatever its id.
	l.p.editReplyEnd(len(`Answer for run-2"}`), `New answer"}`)
	newAnswer := `{"runId":"run-2","callId":"lookup","kind":"completed","output":"New answer"}`
	p.waitView("the edited reply", func(v pageView) bool { return v.Reply == newAnswer })
	p.click("queue-reply")
	l.queue = append(l.queue, "Message 2: "+newAnswer)
	v := l.expect("step 2's message, held as message 2")
	if b := v.Queue[2].Button; b != "Deliver message 2" {
		t.Fatalf("the student's second message's button says %q", b)
	}
	// Click the button that says "Deliver message 2", as the seed words it.
	msgID := evalJS[string](p, `[...document.querySelectorAll("#queue button")].find((b) => b.textContent === "Deliver message 2").dataset.messageId`)
	if msgID != "3" {
		t.Fatalf(`"Deliver message 2" delivers id %s, want 3`, msgID)
	}
	l.deliverAs("step 2: deliver message 2", 3, "2", seedCompleted, "Completed", "New answer")
	p.ticked("step 2 as worded", 1, 2)

	// Delivering the instructor's held stale reply shows step 3's lesson
	// but is not the student's own work: no tick (model/exercise.go).
	l.deliverAs("deliver I1", 2, "I1", seedOtherCall, "Completed", "New answer")
	v2 := p.ticked("no step 3 with the instructor's message", 1, 2)
	if why := v2.Whys[1]; why != "Why: this reply is for run-1; the current call is run-2/lookup (a message from your instructor)" {
		t.Errorf("the instructor's message's explanation %q", why)
	}
	if v2.Current != 3 {
		t.Errorf("after the instructor's message the page says step %d, want 3", v2.Current)
	}
	// The student's own held reply for run-1 ticks it.
	l.deliverAs("deliver message 1", 1, "1", seedOtherCall, "Completed", "New answer")
	p.ticked("step 3 with the student's own message", 1, 2, 3)
}

// boardRow is one row of the console's progress board, read from the DOM.
type boardRow struct {
	Session  string   `json:"session"`
	Cells    []string `json:"cells"`
	Time     string   `json:"time"`
	Stuck    string   `json:"stuck"`
	Accuracy string   `json:"accuracy"`
}

type boardView struct {
	Rows           []boardRow `json:"rows"`
	Distribution   string     `json:"distribution"`
	Misconceptions []string   `json:"misconceptions"`
}

func (v boardView) String() string {
	type fields boardView
	return fmt.Sprintf("%+v", fields(v))
}

const boardJS = `(() => ({
	rows: [...document.querySelectorAll("#progress-body > tr")].map((tr) => ({
		session: tr.dataset.session,
		cells: [...tr.querySelectorAll("td.step")].map((td) => td.dataset.status),
		time: tr.querySelector("td.time").textContent,
		stuck: tr.querySelector("td.stuck").textContent,
		accuracy: tr.querySelector("td.accuracy").textContent,
	})),
	distribution: document.getElementById("step-distribution").textContent,
	misconceptions: [...document.querySelectorAll("#misconceptions > li")].map((li) => li.textContent),
}))()`

func (p *tab) board(what string, ok func(boardView) bool) boardView {
	p.t.Helper()
	return waitUntil(p, what, func(ctx context.Context) (boardView, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[boardView](boardJS))
	}, ok)
}

func cellsFor(done []int, current int) []string {
	out := make([]string, 9)
	for i := range out {
		switch {
		case slices.Contains(done, i+1):
			out[i] = "done"
		case i+1 == current:
			out[i] = "current"
		default:
			out[i] = "todo"
		}
	}
	return out
}

// TestBrowserProgressBoardUpdates: the console's progress board follows a
// student's steps and predictions live (waiting on the board, never on a
// duration), and the student sees their predictions judged.
func TestBrowserProgressBoardUpdates(t *testing.T) {
	t.Parallel()
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	student := newBrowser(t)
	id := student.open(base + "/").Session
	teacher := student.newTab("instructor")
	teacher.openConsole(base, id)
	row := func(v boardView) (boardRow, bool) {
		for _, r := range v.Rows {
			if r.Session == id {
				return r, true
			}
		}
		return boardRow{}, false
	}
	teacher.board("the student's row, nothing done", func(v boardView) bool {
		r, ok := row(v)
		return ok && slices.Equal(r.Cells, cellsFor(nil, 1)) && r.Accuracy == "none yet" && r.Stuck == "" &&
			strings.HasPrefix(v.Distribution, "Working on step 1: 1")
	})

	l := newLab(student)
	l.queueOutput("step 1", "Old answer")
	teacher.board("step 1 on the board", func(v boardView) bool {
		r, ok := row(v)
		return ok && slices.Equal(r.Cells, cellsFor([]int{1}, 2))
	})

	l.start("step 2: start run-2")
	l.queueOutput("step 2", "New answer")
	student.predict("accepted")
	l.deliver("step 2: deliver 2, predicting accepted", 2, seedCompleted, "Completed", "New answer")
	student.predict("accepted")
	l.deliver("step 3: deliver 1, predicting accepted", 1, seedOtherCall, "Completed", "New answer")
	sv := student.exercise("the predictions judged", func(v exerciseView) bool {
		return len(v.Verdicts) == 2 && v.Predictions == "Your predictions: 1 of 2 right."
	})
	if sv.Verdicts[0] != "You predicted accepted: right." || sv.Verdicts[1] != "You predicted accepted: not this time." {
		t.Errorf("verdicts %q", sv.Verdicts)
	}
	teacher.board("steps 2 and 3 and the predictions on the board", func(v boardView) bool {
		r, ok := row(v)
		return ok && slices.Equal(r.Cells, cellsFor([]int{1, 2, 3}, 4)) && r.Accuracy == "1 of 2" &&
			slices.Contains(v.Misconceptions, "a stale reply: 0 of 1 predictions right. 1 of 1 expected a stale reply to be accepted.")
	})
}

// TestBrowserPhoneBarWithTwoNotices: at 360 × 740, with the student's own
// notice and an instructor's, the bar keeps the step's task whole and
// takes at most 40 % of the screen: the newest notice shows, the other is
// behind "1 more notice", which shows it.
func TestBrowserPhoneBarWithTwoNotices(t *testing.T) {
	t.Parallel()
	base := startLabWith(t, server.Config{InstructorToken: testToken})
	p := newBrowser(t)
	p.do("phone viewport", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile))
	id := p.open(base + "/").Session
	l := newLab(p)
	l.queueOutput("step 1", "Old answer")
	req, err := http.NewRequest("POST", base+"/api/inject", strings.NewReader(`{"sessions":["`+id+`"],"preset":"wrongCallId"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitJS(p, "two notices, the newer shown", `document.getElementById("instructor-note").textContent !== "" && document.getElementById("feedback").textContent !== "" && document.getElementById("notices-more").textContent === "1 more notice"`)
	measure := `(() => {
		const bar = document.getElementById("callbar").getBoundingClientRect().height;
		const step = document.getElementById("step-now").getBoundingClientRect();
		const shown = (id) => document.getElementById(id).getBoundingClientRect().height > 0;
		return [bar <= innerHeight * 0.4, step.top >= 0 && step.bottom <= innerHeight && step.height > 0, shown("instructor-note"), shown("feedback"), bar];
	})()`
	got := evalJS[[]any](p, measure)
	if got[0] != true || got[1] != true || got[2] != true || got[3] != false {
		t.Fatalf("bar fits, step in view, note shown, feedback shown = %v", got)
	}
	p.click("notices-more")
	waitJS(p, "both shown", `document.getElementById("feedback").getBoundingClientRect().height > 0 && document.getElementById("notices-more").getAttribute("aria-expanded") === "true"`)
}
