package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// refClient is a correct module: the reference itself behind the Client
// interface, its calls Go values nobody can change.
type refClient struct{}

func (refClient) Begin(runID, callID string) (ClientCall, error) { return Begin(runID, callID), nil }
func (refClient) Receive(c ClientCall, raw string) (ClientCall, string, error) {
	u := Receive(c.(Call), raw)
	return u.Call, u.Notice, nil
}
func (refClient) Expire(c ClientCall, runID, callID string) (ClientCall, string, error) {
	u := Expire(c.(Call), Key{RunID: runID, CallID: callID})
	return u.Call, u.Notice, nil
}
func (refClient) View(c ClientCall) (json.RawMessage, error) {
	return encodeView(c.(Call).View(), true), nil
}

// CallKey writes the call as a JavaScript module's record would be written.
func (refClient) CallKey(c ClientCall) (string, error) {
	return callJSON(c.(Call)), nil
}

func callJSON(c Call) string {
	b := appendKey(nil, c.Key)
	b = append(b, `,"status":`...)
	b = jsjson.AppendString(b, c.Status.String())
	b = append(b, `,"text":`...)
	b = jsjson.AppendString(b, c.Text)
	return string(append(b, '}'))
}

func newRef() (Client, error) { return refClient{}, nil }

// encodeView writes a view as JSON.stringify writes the seed's record;
// withDetail false leaves detail out, as JSON.stringify does for undefined.
func encodeView(v CallView, withDetail bool) json.RawMessage {
	b := append([]byte(`{"runId":`), jsjson.AppendString(nil, v.RunID)...)
	b = append(append(b, `,"callId":`...), jsjson.AppendString(nil, v.CallID)...)
	b = append(append(b, `,"status":`...), jsjson.AppendString(nil, v.Status)...)
	if withDetail {
		b = append(append(b, `,"detail":`...), jsjson.AppendString(nil, v.Detail)...)
	}
	return append(b, '}')
}

// bugs are the mistakes a hand-written module makes, one per stand-in.
type bugs struct {
	runOnly       bool // matches the runId alone
	lastFinalWins bool // a later final reply replaces the first
	deadlineOver  bool // a deadline makes even a final call Unresolved
	keepOnReject  bool // a rejection leaves an Unresolved call Unresolved
	emptyPending  bool // an empty output leaves the call Pending
	coerce        bool // a non-string output or reason is taken as its JSON text
	trim          bool // identifiers are trimmed before matching
	mutate        bool // receive and expire change the call they are given
	noticeOff     bool // "Accepted completion" without its full stop
	noDetail      bool // the view has no detail
	throwOnReject bool // receive throws on a rejection
	stopAfter     int  // after this many receives, every call fails with ErrStop (0: never)
	noKey         bool // its calls cannot be written as JSON (a function in them)
	counter       int  // hidden state: after this many receives, a completion's notice loses its full stop (0: never)
}

// jsCall is a call as a JavaScript object: a pointer, so a module can change it.
type jsCall struct {
	key  Key
	st   Status
	text string
}

type buggy struct {
	b        bugs
	receives *int
}

func (m buggy) Begin(runID, callID string) (ClientCall, error) {
	return &jsCall{key: Key{RunID: runID, CallID: callID}}, nil
}

func (m buggy) same(a, b Key) bool {
	if m.b.trim {
		b = Key{RunID: strings.TrimSpace(b.RunID), CallID: strings.TrimSpace(b.CallID)}
	}
	if m.b.runOnly {
		return a.RunID == b.RunID
	}
	return a == b
}

// set returns the call with st and text, a new one unless the module mutates.
func (m buggy) set(c *jsCall, st Status, text string) *jsCall {
	if m.b.mutate {
		c.st, c.text = st, text
		return c
	}
	return &jsCall{key: c.key, st: st, text: text}
}

func (m buggy) decode(raw string) (Reply, string) {
	v, err := jsjson.Parse(raw)
	if err != nil {
		return Reply{}, NoticeInvalidJSON
	}
	if v.Kind != jsjson.Object {
		return Reply{}, NoticeInvalidReply
	}
	run, ok1 := v.String("runId")
	call, ok2 := v.String("callId")
	kind, ok3 := v.String("kind")
	if !ok1 || !ok2 || !ok3 {
		return Reply{}, NoticeInvalidReply
	}
	field, outcome := "output", Completion
	switch kind {
	case "completed":
	case "rejected":
		field, outcome = "reason", Rejection
	default:
		return Reply{}, NoticeInvalidReply
	}
	mem, ok := v.Member(field)
	if !ok || mem.Kind != jsjson.String && !m.b.coerce {
		return Reply{}, NoticeInvalidReply
	}
	text := mem.Text
	if mem.Kind == jsjson.Null {
		text = "null"
	}
	return Reply{Key: Key{RunID: run, CallID: call}, Outcome: outcome, Text: text}, ""
}

func (m buggy) stop() error {
	if m.b.stopAfter > 0 && *m.receives >= m.b.stopAfter {
		return fmt.Errorf("the module spent its budget: %w", ErrStop)
	}
	return nil
}

func (m buggy) Receive(cc ClientCall, raw string) (ClientCall, string, error) {
	if err := m.stop(); err != nil {
		return nil, "", err
	}
	*m.receives++
	c := cc.(*jsCall)
	r, diag := m.decode(raw)
	switch {
	case diag != "":
		return c, diag, nil
	case !m.same(c.key, r.Key):
		return c, NoticeReplyOtherCall, nil
	case c.st.Final() && !m.b.lastFinalWins:
		return c, NoticeReplyAlreadyFinal, nil
	case r.Outcome == Completion:
		st := Completed
		if m.b.emptyPending && r.Text == "" {
			st = Pending
		}
		n := NoticeAcceptedComplete
		if m.b.noticeOff || m.b.counter > 0 && *m.receives > m.b.counter {
			n = strings.TrimSuffix(n, ".")
		}
		return m.set(c, st, r.Text), n, nil
	default:
		if m.b.throwOnReject {
			return nil, "", errors.New("TypeError: reason.trim is not a function (line 12)")
		}
		if m.b.keepOnReject && c.st == Unresolved {
			return c, NoticeAcceptedReject, nil
		}
		return m.set(c, Rejected, r.Text), NoticeAcceptedReject, nil
	}
}

func (m buggy) Expire(cc ClientCall, runID, callID string) (ClientCall, string, error) {
	if err := m.stop(); err != nil {
		return nil, "", err
	}
	c := cc.(*jsCall)
	switch {
	case !m.same(c.key, Key{RunID: runID, CallID: callID}):
		return c, NoticeDeadlineOtherCall, nil
	case c.st == Pending || m.b.deadlineOver && c.st.Final():
		return m.set(c, Unresolved, ""), NoticeUnresolved, nil
	case c.st == Unresolved:
		return c, NoticeStillUnresolved, nil
	default:
		return c, NoticeDeadlineFinal, nil
	}
}

func (m buggy) View(cc ClientCall) (json.RawMessage, error) {
	if err := m.stop(); err != nil {
		return nil, err
	}
	c := cc.(*jsCall)
	return encodeView(Call{Key: c.key, Status: c.st, Text: c.text}.View(), !m.b.noDetail), nil
}

func (m buggy) CallKey(cc ClientCall) (string, error) {
	if m.b.noKey {
		return "", errors.New("the call holds a function")
	}
	c := cc.(*jsCall)
	return callJSON(Call{Key: c.key, Status: c.st, Text: c.text}), nil
}

func newBuggy(b bugs) NewClient {
	return func() (Client, error) { return buggy{b: b, receives: new(int)}, nil }
}

var wrongModules = []struct {
	name string
	b    bugs
	want Property
}{
	{"checking only the run id", bugs{runOnly: true}, PropOtherCallID},
	{"last final wins", bugs{lastFinalWins: true}, PropLaterFinal},
	{"a deadline over a result", bugs{deadlineOver: true}, PropDeadlineResult},
	{"Unresolved kept on a rejection", bugs{keepOnReject: true}, PropLateReply},
	{"an empty output treated as pending", bugs{emptyPending: true}, PropEmptyOutput},
	{"output coerced to a string", bugs{coerce: true}, PropWrongShape},
	{"trimmed identifiers", bugs{trim: true}, PropTrims},
	{"a mutated call", bugs{mutate: true}, PropMutates},
	{"a notice text one character off", bugs{noticeOff: true}, PropNoticeText},
	{"a view without detail", bugs{noDetail: true}, PropViewShape},
	{"a throw on a rejection", bugs{throwOnReject: true}, PropError},
}

func TestCorrectModulePasses(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, 1<<53 - 1} {
		r := Check(newRef, seed, []Case{{Name: "mine", Frames: Trace{replyFrame("{}"), deliverFrame(1)}}})
		n := len(Cases(seed)) + 2 // the instructor's case and the search
		want := Result{Status: CodePassed, Cases: n, Passed: n, Seed: seed,
			Own: []CaseOutcome{{Case: "mine", Passed: true}}, Explored: r.Explored, Depth: 5, Exhausted: true, Coverage: r.Coverage}
		if !reflect.DeepEqual(r, want) || r.Explored < 1000 {
			t.Errorf("seed %d: got %+v, want %+v", seed, r, want)
		}
	}
}

// The correct module of a JavaScript programmer (a fresh object per
// update) passes as the reference does.
func TestBuggyWithoutBugsPasses(t *testing.T) {
	if r := Check(newBuggy(bugs{}), 7, nil); r.Status != CodePassed || r.Passed != r.Cases {
		t.Fatalf("got %+v", r)
	}
}

func TestWrongModulesFailShrunk(t *testing.T) {
	for _, m := range wrongModules {
		t.Run(m.name, func(t *testing.T) {
			nc := newBuggy(m.b)
			r := Check(nc, 3, nil)
			f := r.Failure
			if f == nil || r.Status == CodePassed {
				t.Fatalf("passed: %+v", r)
			}
			if f.Property != m.want {
				t.Errorf("property %q, want %q (frames %s)", f.Property, m.want, mustJSON(t, f.Frames))
			}
			wantStatus := CodeFailed
			if m.want == PropError {
				wantStatus = CodeError
				if !strings.Contains(r.Error, "line 12") || f.Got.Error == nil {
					t.Errorf("error %q, got.error %v", r.Error, f.Got.Error)
				}
			}
			if r.Status != wantStatus || r.Passed >= r.Cases {
				t.Errorf("status %s, passed %d of %d", r.Status, r.Passed, r.Cases)
			}
			if len(f.Frames) > 8 || f.Step != len(f.Frames)-1 {
				t.Errorf("shrunk to %d frames, step %d: %s", len(f.Frames), f.Step, mustJSON(t, f.Frames))
			}
			if err := ValidateTrace(f.Frames); err != nil {
				t.Errorf("shrunk trace is not valid: %v", err)
			}
			if at := firstDifference(t, nc, f.Frames); at != f.Step {
				t.Errorf("replayed, the trace differs at %d, the failure says %d", at, f.Step)
			}
			if at := firstDifference(t, newRef, f.Frames); at != -1 {
				t.Errorf("replayed on the reference itself, it differs at %d", at)
			}
			t.Logf("%d frames: %s", len(f.Frames), mustJSON(t, f.Frames))
		})
	}
}

// firstDifference replays t on the reference and on a module with a host
// of its own, and returns the first frame after which the view, the notice
// or the given call differ, -1 when none does.
func firstDifference(t *testing.T, nc NewClient, tr Trace) int {
	t.Helper()
	c, _ := nc()
	lab := NewLab()
	cur, _ := c.Begin("run-1", "lookup")
	notice, runs := NoticeReady, 1
	var held []func(ClientCall) (ClientCall, string, error)
	for i, f := range tr {
		e, err := lab.Decide(f, Limits{})
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		lab.Apply(e)
		mutated := false
		switch f.Kind {
		case StartRun:
			runs++
			cur, _ = c.Begin(fmt.Sprintf("run-%d", runs), "lookup")
			notice = NoticeStarted
		case QueueReply:
			raw := f.Raw
			held = append(held, func(k ClientCall) (ClientCall, string, error) { return c.Receive(k, raw) })
		case QueueDeadline:
			var v ViewJSON
			b, _ := c.View(cur)
			json.Unmarshal(b, &v)
			held = append(held, func(k ClientCall) (ClientCall, string, error) { return c.Expire(k, v.RunID, v.CallID) })
		case Deliver:
			before, _ := c.View(cur)
			next, n, err := held[f.Message-1](cur)
			if err != nil {
				return i
			}
			after, _ := c.View(cur)
			mutated = string(before) != string(after)
			cur, notice = next, n
		}
		b, err := c.View(cur)
		if err != nil {
			return i
		}
		want := encodeView(lab.Call().View(), true)
		if string(b) != string(want) || notice != lab.View().Notice || mutated {
			return i
		}
	}
	return -1
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResultJSONShape(t *testing.T) {
	r := Check(newBuggy(bugs{emptyPending: true}), 5, nil)
	var got map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, r)), &got); err != nil {
		t.Fatal(err)
	}
	f := got["failure"].(map[string]any)
	keys := func(m map[string]any) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		return strings.Join(sorted(ks), ",")
	}
	for _, c := range []struct{ got, want string }{
		{keys(got), "cases,coverage,depth,exhausted,explored,failure,passed,seed,status"},
		{keys(f), "case,expected,frames,got,property,step"},
		{keys(f["expected"].(map[string]any)), "call,notice"},
		{keys(f["got"].(map[string]any)), "call,error,notice"},
		{keys(f["expected"].(map[string]any)["call"].(map[string]any)), "callId,detail,runId,status"},
	} {
		if c.got != c.want {
			t.Errorf("keys %s, want %s", c.got, c.want)
		}
	}
	if g := f["got"].(map[string]any); g["error"] != nil || g["call"].(map[string]any)["status"] != "Pending" {
		t.Errorf("got %v", g)
	}
	wantFrames := `[{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"\"}"},{"type":"deliver","message":1}]`
	if fr := mustJSON(t, r.Failure.Frames); fr != wantFrames {
		t.Errorf("frames %s\nwant   %s", fr, wantFrames)
	}
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestStopEndsTheCheck(t *testing.T) {
	r := Check(newBuggy(bugs{stopAfter: 3}), 0, nil)
	if r.Status != CodeError || !strings.Contains(r.Error, "spent its budget") || r.Failure == nil || r.Failure.Got.Error == nil {
		t.Fatalf("got %+v", r)
	}
	// walkthrough step 4 makes the third receive (frame 6), after which
	// nothing runs; the three cases before it pass.
	if r.Passed != 3 || r.Failure.Case != "walkthrough step 4" || !strings.Contains(r.Error, `case "walkthrough step 4", frame 6`) {
		t.Errorf("passed %d, case %q, error %q", r.Passed, r.Failure.Case, r.Error)
	}
}

func TestModuleThatCannotLoad(t *testing.T) {
	nc := func() (Client, error) { return nil, errors.New("SyntaxError: Unexpected token (line 3)") }
	r := Check(nc, 0, nil)
	if r.Status != CodeError || r.Error != "SyntaxError: Unexpected token (line 3)" || r.Failure != nil || r.Passed != 0 {
		t.Fatalf("got %+v", r)
	}
}

func TestInvalidOwnCase(t *testing.T) {
	r := Check(newRef, 0, []Case{{Name: "bad", Frames: Trace{deliverFrame(1)}}})
	if r.Status != CodeError || !strings.Contains(r.Error, `case "bad": frame 1: unknown message id 1`) {
		t.Fatalf("got %+v", r)
	}
}

// An instructor's case is reported by name, whether or not the module
// fails the built-in ones.
func TestOwnCases(t *testing.T) {
	own := []Case{
		{Name: "stale after final", Frames: Trace{replyFrame(Draft(Key{"run-1", CallID})), startFrame(), replyFrame(Draft(Key{"run-2", CallID})), deliverFrame(2), deliverFrame(1)}},
		{Name: "deadline", Frames: Trace{deadlineFrame(), deliverFrame(1)}},
	}
	r := Check(newBuggy(bugs{deadlineOver: true}), 0, own)
	want := []CaseOutcome{{"stale after final", true}, {"deadline", true}}
	if !reflect.DeepEqual(r.Own, want) {
		t.Errorf("own %+v", r.Own)
	}
	own[1].Frames = Trace{replyFrame(Draft(Key{"run-1", CallID})), deliverFrame(1), deadlineFrame(), deliverFrame(2)}
	r = Check(newBuggy(bugs{deadlineOver: true}), 0, own)
	if want[1].Passed = false; !reflect.DeepEqual(r.Own, want) {
		t.Errorf("own %+v", r.Own)
	}
}

func TestCheckIsDeterministic(t *testing.T) {
	for _, m := range wrongModules[:4] {
		a, b := Check(newBuggy(m.b), 11, nil), Check(newBuggy(m.b), 11, nil)
		if mustJSON(t, a) != mustJSON(t, b) {
			t.Errorf("%s: two checks differ:\n%s\n%s", m.name, mustJSON(t, a), mustJSON(t, b))
		}
	}
}

func BenchmarkCheckCorrect(b *testing.B) {
	for b.Loop() {
		if r := Check(newRef, 1, nil); r.Status != CodePassed {
			b.Fatal(r.Status)
		}
	}
}

func BenchmarkCheckWrong(b *testing.B) {
	nc := newBuggy(bugs{coerce: true})
	for b.Loop() {
		if r := Check(nc, 1, nil); r.Status != CodeFailed {
			b.Fatal(r.Status)
		}
	}
}
