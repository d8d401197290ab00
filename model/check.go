package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// The code check: every case is played on the reference (a Lab, so that
// the lab and the checker never disagree) and on a student's module driven
// as the seed's main.js drives ToolCall, and after every frame the two are
// compared: the view field by field, the notice text for text, and the call
// a receive or expire was given must show the same view afterwards.
// docs/code.md describes the cases, the comparison and the shrinker.

// ErrStop, wrapped in a Client's error, says the module can no longer be
// run (its budget is spent, its memory cap reached): the check ends at once
// with status "error", without playing further cases or shrinking.
var ErrStop = errors.New("the module was stopped")

// The statuses of a Result.
const (
	CodePassed = "passed"
	CodeFailed = "failed"
	CodeError  = "error" // the module raised an error, or could not be loaded or run
)

// Result is a check's outcome, the protocol's "code" object without the
// server's "submission".
type Result struct {
	Status string `json:"status"`
	Cases  int    `json:"cases"`
	Passed int    `json:"passed"`
	Seed   uint64 `json:"seed"`
	// Error says what happened, and where, for status "error".
	Error   string   `json:"error,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Own is how the module did on each of the instructor's own cases, in
	// the order given (an addition to the shape).
	Own []CaseOutcome `json:"own,omitempty"`
	// What the search (search.go) covered: the states it visited, its
	// bound on frames, whether it went through every sequence within its
	// bounds, and the lesson's situations it met.
	Explored  int         `json:"explored"`
	Depth     int         `json:"depth"`
	Exhausted bool        `json:"exhausted"`
	Coverage  []Situation `json:"coverage,omitempty"`
	// SearchNote says in words why the search could not merge states or
	// reuse answers (a module with state outside its calls, calls that
	// cannot be written as JSON).
	SearchNote string `json:"searchNote,omitempty"`
}

// CaseOutcome is whether the module passed one named case.
type CaseOutcome struct {
	Case   string `json:"case"`
	Passed bool   `json:"passed"`
}

// Failure is the first failing case, shrunk: replaying Frames on the
// reference and on the module, the two first differ after frame Step.
type Failure struct {
	Case     string   `json:"case"`
	Frames   Trace    `json:"frames"`
	Step     int      `json:"step"` // 0-based index into Frames
	Expected Expected `json:"expected"`
	Got      Got      `json:"got"`
	// Property is the failure in words for the teacher's board ("accepts
	// a reply for an older run"): one of the Prop constants.
	Property Property `json:"property"`
}

// Expected is what the reference showed and said after the step.
type Expected struct {
	Call   ViewJSON `json:"call"`
	Notice string   `json:"notice"`
}

// Got is what the module showed and said after the step: its view as its
// JSON text (null when it has none), its notice, and its error or what it
// did wrong that the view and notice do not show (a changed call).
type Got struct {
	Call   json.RawMessage `json:"call"`
	Notice *string         `json:"notice"`
	Error  *string         `json:"error"`
}

// ViewJSON is a call's view as the protocol writes it.
type ViewJSON struct {
	RunID  string `json:"runId"`
	CallID string `json:"callId"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

func viewJSON(v CallView) ViewJSON { return ViewJSON(v) }

// maxGotView bounds the module's view text kept in a Failure.
const maxGotView = 4 << 10

// Check plays every case on newClient's modules (a fresh instance per
// case): the nine walkthrough steps, then the instructor's own cases
// (extra), then the search within DefaultSearchBounds (one case), then the
// campaign of seed. Every case is played, so Passed counts all that pass.
// A difference the search finds is the failure reported, already
// shortest; otherwise the first failing case, in that order, is shrunk
// and returned. An error from the module makes the status "error"; one
// that wraps ErrStop ends the check where it happened, unshrunk.
func Check(newClient NewClient, seed uint64, extra []Case) Result {
	return CheckWithin(newClient, seed, extra, DefaultSearchBounds())
}

// CheckWithin is Check with the search's bounds; b.Depth 0 leaves the
// search out (the check before issue 43).
func CheckWithin(newClient NewClient, seed uint64, extra []Case, b SearchBounds) Result {
	campaign := Campaign(seed)
	all := Walkthrough()
	all = append(all, extra...)
	nWalk := NumSteps
	res := Result{Status: CodePassed, Cases: len(all) + len(campaign), Seed: seed}
	var first *outcome
	var firstCase Case
	playAll := func(cases []Case) *Result {
		for i, c := range cases {
			own := i >= nWalk && i < nWalk+len(extra) && len(cases) == len(all)
			if own {
				if err := ValidateTrace(c.Frames); err != nil {
					r := res.stopped(fmt.Sprintf("case %q: %v", c.Name, err), nil)
					return &r
				}
			}
			o, err := play(newClient, c.Frames)
			if err != nil {
				r := res.stopped(err.Error(), nil)
				return &r
			}
			passed := o == nil
			if own {
				res.Own = append(res.Own, CaseOutcome{Case: c.Name, Passed: passed})
			}
			if passed {
				res.Passed++
				continue
			}
			if o.stop != nil {
				f := o.failure(c.Name, c.Frames[:o.step+1])
				r := res.stopped(where(c.Name, o)+": "+o.stop.Error(), &f)
				return &r
			}
			if first == nil {
				first, firstCase = o, c
			}
		}
		return nil
	}
	if r := playAll(all); r != nil {
		return *r
	}
	var found *SearchReport
	if b.Depth > 0 {
		rep := Search(newClient, b)
		res.Cases++
		res.Explored, res.Depth, res.Exhausted, res.Coverage, res.SearchNote = rep.Explored, rep.Depth, rep.Exhausted, rep.Coverage, rep.Note
		if rep.stop {
			return res.stopped(rep.Error, rep.Failure)
		}
		if rep.Failure == nil {
			res.Passed++
		} else {
			found = &rep
		}
	}
	if r := playAll(campaign); r != nil {
		return *r
	}
	name, frames, o := "", Trace(nil), (*outcome)(nil)
	switch {
	case found != nil:
		name, frames, o = found.Failure.Case, found.Failure.Frames, found.o
	case first != nil:
		name = firstCase.Name
		frames, o = shrink(newClient, firstCase.Frames, first)
	default:
		return res
	}
	f := o.failure(name, frames)
	res.Failure = &f
	res.Status = CodeFailed
	if o.property == PropError {
		res.Status = CodeError
		res.Error = where(name, o) + ": " + *o.got.Error
	}
	return res
}

func (r Result) stopped(msg string, f *Failure) Result {
	r.Status, r.Error, r.Failure = CodeError, msg, f
	return r
}

// where names a failing step in a sentence.
func where(name string, o *outcome) string {
	return fmt.Sprintf("case %q, frame %d (%s)", name, o.step+1, frameText(o.frame))
}

// outcome is a failing step of a play.
type outcome struct {
	step     int
	frame    Command
	expected Expected
	got      Got
	property Property
	stop     error // the module's error wrapped ErrStop
}

func (o *outcome) failure(name string, frames Trace) Failure {
	return Failure{Case: name, Frames: frames, Step: o.step, Expected: o.expected, Got: o.got, Property: o.property}
}

// heldMsg is a message as the host captures it at queue time: a reply's
// text, or a deadline's identifiers read from view(current).
type heldMsg struct {
	deadline      bool
	raw           string
	runID, callID string
}

// host is the seed's main.js over a Client.
type host struct {
	c       Client
	current ClientCall
	showing // what the module shows of current, and its notice
	runs    int
	held    []heldMsg
}

// showing is what the module shows after a frame: view(current) as it
// wrote it, read as the host reads it, and the notice.
type showing struct {
	view   []byte
	parsed CallView
	shape  string // parseView(view)
	notice string
}

// play plays t on the reference and on a fresh module; it returns the first
// failing step, nil when the module passes. The error is the case's own
// (a frame the reference refuses, or newClient failing).
func play(newClient NewClient, t Trace) (*outcome, error) {
	ref, h, setupErr, err := startSides(newClient)
	if err != nil {
		return nil, err
	}
	for i, f := range t {
		rs, err := ref.play(f)
		if err != nil {
			return nil, fmt.Errorf("frame %d (%s): %w", i+1, frameText(rs.frame), err)
		}
		if setupErr != nil {
			return judge(i, rs, ref.notice, nil, "", setupErr), nil
		}
		mutated, err := h.step(rs.frame)
		if o := judge(i, rs, ref.notice, &h.showing, mutated, err); o != nil {
			return o, nil
		}
	}
	return nil, nil
}

// startSides makes the two sides a trace is played on: the reference, and
// a fresh module begun on run 1 (setupErr: what its begin or view raised).
func startSides(newClient NewClient) (ref *refHost, h *host, setupErr, err error) {
	c, err := newClient()
	if err != nil {
		return nil, nil, nil, err
	}
	h = &host{c: c, showing: showing{notice: NoticeReady}, runs: 1}
	return newRefHost(), h, h.begin(runID(1)), nil
}

// play plays frame f (only its fields a trace has) on the reference: what
// it did, for judge.
func (r *refHost) play(f Command) (refStep, error) {
	f = Command{Kind: f.Kind, Raw: f.Raw, Message: f.Message}
	rs := refStep{frame: f, before: r.call}
	if err := r.step(f); err != nil {
		return rs, err
	}
	rs.after = r.call
	if f.Kind == Deliver {
		rs.msg = r.held[f.Message-1]
	}
	return rs, nil
}

// judge compares what the module shows after frame i (s, and mutated
// when the call it was given changed), or the error it raised, with what
// the reference did there (rs, and its notice); nil when they agree. It
// is the comparison of every case and of the search.
func judge(i int, rs refStep, refNotice string, s *showing, mutated string, err error) *outcome {
	want := rs.after.View()
	if err == nil && s.shape == "" && s.parsed == want && s.notice == refNotice && mutated == "" {
		return nil
	}
	o := &outcome{step: i, frame: rs.frame, expected: Expected{Call: viewJSON(want), Notice: refNotice}}
	if err != nil {
		o.fail(err)
		return o
	}
	switch {
	case s.shape != "":
		o.property = PropViewShape
		mutated = "view returned " + s.shape
	case s.parsed != want || s.notice != refNotice:
		if rs.frame.Kind == Deliver && !rs.kindKnown {
			rs.kind = Explain(rs.before, rs.msg).Kind
		}
		o.property = classify(rs, s.parsed, s.notice)
	default:
		o.property = PropMutates
	}
	o.got = s.got()
	if mutated != "" {
		o.got.Error = strPtr(mutated)
	}
	return o
}

// refHost is the reference: the seed's host over the model's own Begin,
// Receive, Expire and View, as a Lab plays a student's frames (a test
// holds the two to the same views and notices), without the Lab's
// receipts, explanations and exercise, which the check does not compare.
type refHost struct {
	runs   int
	call   Call
	notice string
	held   []Message
}

func newRefHost() *refHost {
	return &refHost{runs: 1, call: Begin(runID(1), CallID), notice: NoticeReady}
}

func (r *refHost) step(f Command) error {
	switch f.Kind {
	case StartRun:
		r.runs++
		r.call, r.notice = Begin(runID(r.runs), CallID), NoticeStarted
	case QueueReply:
		r.held = append(r.held, Message{ID: len(r.held) + 1, Kind: ReplyMessage, Raw: f.Raw})
	case QueueDeadline:
		r.held = append(r.held, Message{ID: len(r.held) + 1, Kind: DeadlineMessage, Key: r.call.Key})
	case Deliver:
		if f.Message < 1 || f.Message > len(r.held) {
			return fmt.Errorf("%w %d", ErrUnknownMessage, f.Message)
		}
		m := r.held[f.Message-1]
		var u Update
		if m.Kind == DeadlineMessage {
			u = Expire(r.call, m.Key)
		} else {
			u = Receive(r.call, m.Raw)
		}
		r.call, r.notice = u.Call, u.Notice
	default:
		return fmt.Errorf("a trace has no frame of command kind %d", f.Kind)
	}
	return nil
}

// fail records a module's error at o's step.
func (o *outcome) fail(err error) {
	o.property = PropError
	o.got = Got{Error: strPtr(err.Error())}
	if errors.Is(err, ErrStop) {
		o.stop = err
	}
}

func strPtr(s string) *string { return &s }

// got is what the module shows after a step.
func (h *showing) got() Got {
	g := Got{Notice: strPtr(h.notice)}
	if len(h.view) <= maxGotView && json.Valid(h.view) {
		g.Call = json.RawMessage(h.view)
	}
	return g
}

// setView keeps v, the view of the current call, read.
func (h *showing) setView(v []byte) {
	h.view = v
	h.parsed, h.shape = parseView(v)
}

// begin makes the current call, as main.js does at load and on Start.
func (h *host) begin(runID string) error {
	call, err := h.c.Begin(runID, CallID)
	if err != nil {
		return fmt.Errorf("begin(%q, %q): %w", runID, CallID, err)
	}
	v, err := h.c.View(call)
	if err != nil {
		return fmt.Errorf("view of begin(%q, %q): %w", runID, CallID, err)
	}
	h.current = call
	h.setView(v)
	return nil
}

// step applies one frame as main.js does. mutated is not "" when the call
// receive or expire was given shows another view afterwards.
func (h *host) step(f Command) (mutated string, err error) {
	switch f.Kind {
	case StartRun:
		h.runs++
		if err := h.begin(runID(h.runs)); err != nil {
			return "", err
		}
		h.notice = NoticeStarted
	case QueueReply:
		h.held = append(h.held, heldMsg{raw: f.Raw})
	case QueueDeadline:
		// A bad view is this step's failure.
		h.held = append(h.held, heldMsg{deadline: true, runID: h.parsed.RunID, callID: h.parsed.CallID})
	case Deliver:
		given, before := h.current, h.view
		next, notice, fn, err := deliverTo(h.c, given, h.held[f.Message-1])
		if err != nil {
			return "", err
		}
		after, err := h.c.View(given)
		if err != nil {
			return "", fmt.Errorf("view of the call %s was given: %w", fn, err)
		}
		v, err := h.c.View(next)
		if err != nil {
			return "", fmt.Errorf("view of the call %s returned: %w", fn, err)
		}
		mutated = mutatedText(fn, before, after)
		h.current, h.notice = next, notice
		h.setView(v)
	}
	return mutated, nil
}

// deliverTo applies the held message m to the call given, as main.js
// does: receive(call, raw) or expire(call, runId, callId). fn names the
// call in sentences.
func deliverTo(c Client, given ClientCall, m heldMsg) (next ClientCall, notice, fn string, err error) {
	if m.deadline {
		fn = fmt.Sprintf("expire(call, %q, %q)", m.runID, m.callID)
		next, notice, err = c.Expire(given, m.runID, m.callID)
	} else {
		fn = "receive(call, raw)"
		next, notice, err = c.Receive(given, m.raw)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", fn, err)
	}
	return next, notice, fn, err
}

// mutatedText says how the call fn was given changed, "" when it did not.
func mutatedText(fn string, before, after []byte) string {
	if string(after) == string(before) {
		return ""
	}
	return fmt.Sprintf("%s changed the call it was given: its view was %s and is now %s", fn, clip(before), clip(after))
}

// clip shortens a view's text for a sentence.
func clip(b []byte) string {
	const n = 200
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// viewFields are the fields of a view, in the seed's order.
var viewFields = [...]string{"runId", "callId", "status", "detail"}

// parseView reads a module's view text as the host does: an object whose
// runId, callId, status and detail are strings (other fields are ignored).
// shape is not "" when it is not, and says why.
func parseView(b []byte) (v CallView, shape string) {
	val, err := jsjson.Parse(b)
	if err != nil {
		return CallView{}, "text that is not JSON"
	}
	if val.Kind != jsjson.Object {
		return CallView{}, "a " + val.Kind.String() + ", not an object"
	}
	var s [4]string
	for i, name := range viewFields {
		m, ok := val.Member(name)
		if !ok {
			return CallView{}, "an object without " + name
		}
		if m.Kind != jsjson.String {
			return CallView{}, "an object whose " + name + " is a " + m.Kind.String() + ", not a string"
		}
		s[i] = m.Text
	}
	return CallView{RunID: s[0], CallID: s[1], Status: s[2], Detail: s[3]}, ""
}

// Property is a failure in words, as the teacher's board shows it and a
// class summary counts it ("12 of 30 programs accept a stale reply").
type Property string

// The properties, from what the failing step was and what the reference
// did there (see classify).
const (
	PropError           Property = "raises an error"
	PropViewShape       Property = "returns a view that is not four strings"
	PropMutates         Property = "changes the call it was given"
	PropOlderRun        Property = "accepts a reply for an older run"
	PropOtherRun        Property = "accepts a reply for another run"
	PropOtherCallID     Property = "accepts a reply for another call id"
	PropTrims           Property = "trims identifiers"
	PropLaterFinal      Property = "a later final reply overwrites the first"
	PropDeadlineResult  Property = "a deadline overwrites a result"
	PropOlderDeadline   Property = "accepts a deadline for an older run"
	PropIgnoresDeadline Property = "ignores a deadline for the current call"
	PropLateReply       Property = "a late reply does not resolve Unresolved"
	PropIgnoresReply    Property = "ignores a matching reply"
	PropEmptyOutput     Property = "an empty output is not a completion"
	PropChangesText     Property = "changes the output or reason"
	PropMalformed       Property = "accepts text that is not JSON"
	PropWrongShape      Property = "accepts JSON that is not a reply"
	PropNewRun          Property = "a new run does not begin Pending"
	PropIdentity        Property = "shows the wrong identifiers"
	PropStatus          Property = "shows the wrong status"
	PropDetail          Property = "shows the wrong detail"
	PropWrongNotice     Property = "gives the wrong notice"
	PropNoticeText      Property = "notice text differs"
)

// Properties lists every Property, for a board's legend and the tests.
func Properties() []Property {
	return []Property{
		PropError, PropViewShape, PropMutates, PropOlderRun, PropOtherRun, PropOtherCallID, PropTrims,
		PropLaterFinal, PropDeadlineResult, PropOlderDeadline, PropIgnoresDeadline, PropLateReply,
		PropIgnoresReply, PropEmptyOutput, PropChangesText, PropMalformed, PropWrongShape, PropNewRun,
		PropIdentity, PropStatus, PropDetail, PropWrongNotice, PropNoticeText,
	}
}

// refStep is what the reference did at a step.
type refStep struct {
	frame         Command
	before, after Call
	msg           Message      // Deliver: the message delivered
	kind          DeliveryKind // Deliver: what it was to the call, once kindKnown
	kindKnown     bool
}

// classify names a step where the module's view or notice differs from
// the reference's: first by what the delivered message was (a stale reply
// the module acted on, a deadline it let overwrite a result), then by the
// first field that differs.
func classify(rs refStep, got CallView, notice string) Property {
	want := rs.after.View()
	if rs.frame.Kind == Deliver {
		if p := classifyDelivery(rs, got, notice); p != "" {
			return p
		}
	}
	switch {
	case got.RunID != want.RunID || got.CallID != want.CallID:
		return PropIdentity
	case rs.frame.Kind == StartRun:
		return PropNewRun
	case got.Status != want.Status:
		return PropStatus
	case got.Detail != want.Detail:
		return PropDetail
	}
	for _, n := range append(DeliveryNotices(), NoticeReady, NoticeStarted) {
		if notice == n {
			return PropWrongNotice
		}
	}
	return PropNoticeText
}

func classifyDelivery(rs refStep, got CallView, notice string) Property {
	was := rs.before.View()
	moved := got != was
	// acted: the module changed the call, or said it did.
	acted := moved || strings.HasPrefix(notice, "Accepted") || notice == NoticeUnresolved
	var r Reply
	if rs.msg.Kind == ReplyMessage {
		r, _ = ParseReply(rs.msg.Raw)
	}
	trimmed := strings.TrimSpace(r.Key.RunID) == rs.before.Key.RunID && strings.TrimSpace(r.Key.CallID) == rs.before.Key.CallID
	switch rs.kind {
	case KindStaleReply:
		switch {
		case !acted:
		case trimmed:
			return PropTrims
		case r.Key.CallID == rs.before.Key.CallID && earlierRun(r.Key.RunID, runNumber(rs.before.Key.RunID)):
			return PropOlderRun
		default:
			return PropOtherRun
		}
	case KindWrongCallID:
		switch {
		case !acted:
		case trimmed:
			return PropTrims
		default:
			return PropOtherCallID
		}
	case KindDuplicate, KindContradictory:
		if acted {
			return PropLaterFinal
		}
	case KindMalformedJSON:
		if acted {
			return PropMalformed
		}
	case KindWrongShape:
		if acted {
			return PropWrongShape
		}
	case KindStaleDeadline:
		if acted {
			return PropOlderDeadline
		}
	case KindDeadline:
		switch {
		case rs.before.Status.Final() && acted:
			return PropDeadlineResult
		case rs.before.Status == Pending && !moved:
			return PropIgnoresDeadline
		}
	case KindMatchingReply, KindLateReply:
		want := rs.after.View()
		switch {
		case rs.kind == KindLateReply && got.Status == Unresolved.String():
			return PropLateReply
		case rs.after.Status == Completed && rs.after.Text == "" && got.Status != want.Status:
			return PropEmptyOutput
		case !moved:
			return PropIgnoresReply
		case got.Status == want.Status && got.Detail != want.Detail:
			return PropChangesText
		}
	}
	return ""
}

// runNumber is n of "run-n" as the lab writes it, 0 for any other text.
func runNumber(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "run-"))
	if err != nil || n < 1 || runID(n) != id {
		return 0
	}
	return n
}
