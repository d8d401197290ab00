package server_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/server"
)

// caseList is GET /api/code/cases's answer (docs/instructor.md).
type caseList struct {
	Cases []struct {
		Name     string   `json:"name"`
		Words    []string `json:"words"`
		By       string   `json:"by"`
		Added    string   `json:"added"`
		Sessions int      `json:"sessions"`
		Passing  int      `json:"passing"`
		Checked  int      `json:"checked"`
	} `json:"cases"`
}

// TestCasesByDemonstration is issue 44's "done when" over the API: a case
// made from a session the teacher clicked through, a failure kept as a
// case, the list with who passes, and a removal.
func TestCasesByDemonstration(t *testing.T) {
	t.Parallel()
	ts := runInstructorLab(t, server.Config{})
	cl := createClass(t, ts, "Distributed systems")
	join := func(local, name string) (*client, string) {
		_, loc, _ := joinAs(t, browserClient(t, local), ts, cl.Code, name)
		m := labPath.FindStringSubmatch(loc)
		if m == nil {
			t.Fatalf("joining as %s: sent to %q", name, loc)
		}
		c, _ := dial(t, ts, m[1])
		return c, m[1]
	}
	// A module that lets a deadline of any run expire the current call.
	lesson := testdata(t, "ToolCall.res.js")
	anyDeadline := strings.Replace(lesson, "function expire(call, runId, callId) {\n  if (!sameKey(", "function expire(call, runId, callId) {\n  if (false && !sameKey(", 1)
	if anyDeadline == lesson {
		t.Fatal("no guard to drop in expire")
	}
	right, rightID := join("127.0.0.1", "Ada")
	wrong, wrongID := join("127.0.0.2", "Bob")
	right.submit(lesson, 1)
	wrong.submit(anyDeadline, 1)

	// The teacher demonstrates in a practice session of their own (the
	// open lab): a reply in run-1 they do not want in the case, then
	// queue a deadline, start a new run, deliver the old deadline.
	demoID := newID()
	demo, _ := dial(t, ts, demoID)
	demo.do(queueReply(`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`))
	demo.do(`{"type":"start"}`)
	demo.do(`{"type":"queueDeadline"}`)
	demo.do(`{"type":"start"}`)
	if f := demo.do(`{"type":"deliver","message":2}`); f.Notice != "Ignored deadline: different call identity." {
		t.Fatalf("the demonstration: %s", f.raw)
	}
	post := func(body string) (int, []byte) {
		status, _, answer := call(t, ts, "POST", "/api/code/cases", testToken, "", body)
		return status, answer
	}
	for _, bad := range []struct{ body, says string }{
		{`{"name":"x","fromSession":"` + demoID + `","fromRun":"run-9","class":"` + cl.ID + `"}`, "run-9"},
		{`{"name":"x","fromSession":"` + newID() + `","class":"` + cl.ID + `"}`, "unknown session"},
		{`{"name":"x","fromFailure":"` + rightID + `","class":"` + cl.ID + `"}`, "no failing case"},
		{`{"name":"x","fromRun":"run-2","class":"` + cl.ID + `"}`, "fromSession"},
	} {
		if status, answer := post(bad.body); status < 400 || !strings.Contains(string(answer), bad.says) {
			t.Fatalf("POST %s: %d %s", bad.body, status, answer)
		}
	}
	status, answer := post(`{"name":"an old deadline","fromSession":"` + demoID + `","fromRun":"run-2","class":"` + cl.ID + `"}`)
	if status != 200 || !strings.Contains(string(answer), `"applied":2`) {
		t.Fatalf("a case from the demonstration: %d %s", status, answer)
	}
	own := func(c *client, name string) (found, passed bool) {
		code := c.checked(1)
		for _, o := range code.Own {
			if o.Case == name {
				return true, o.Passed
			}
		}
		return false, false
	}
	if found, passed := own(right, "an old deadline"); !found || !passed {
		t.Fatal("the lesson's module does not pass the demonstrated case")
	}
	if found, passed := own(wrong, "an old deadline"); !found || passed {
		t.Fatal("a module that lets any deadline expire the call passes the demonstrated case")
	}
	list := func() caseList {
		t.Helper()
		status, _, body := call(t, ts, "GET", "/api/code/cases?class="+url.QueryEscape(cl.ID), testToken, "", "")
		var l caseList
		if err := json.Unmarshal(body, &l); err != nil || status != 200 {
			t.Fatalf("GET /api/code/cases: %d %s", status, body)
		}
		return l
	}
	l := list()
	if len(l.Cases) != 1 || l.Cases[0].Name != "an old deadline" || l.Cases[0].Sessions != 2 || l.Cases[0].Passing != 1 || l.Cases[0].By != "instructor" ||
		strings.Join(l.Cases[0].Words, "; ") != "start a new run; queue a deadline; start a new run; deliver message 1" {
		t.Fatalf("the list: %+v", l)
	}

	// Bob's failure kept as a case for the class: every member has it.
	status, answer = post(`{"name":"Bob's mistake","fromFailure":"` + wrongID + `","class":"` + cl.ID + `"}`)
	if status != 200 || !strings.Contains(string(answer), `"applied":2`) {
		t.Fatalf("a failure kept as a case: %d %s", status, answer)
	}
	for _, c := range []*client{right, wrong} {
		for {
			if found, _ := own(c, "Bob's mistake"); found {
				break
			}
		}
	}
	if l := list(); len(l.Cases) != 2 || l.Cases[1].Name != "Bob's mistake" || l.Cases[1].Passing != 1 {
		t.Fatalf("the list with the kept failure: %+v", l)
	}

	// Removed: gone from every member's own cases and from the list.
	status, _, body := call(t, ts, "DELETE", "/api/code/cases/"+url.PathEscape("an old deadline")+"?class="+url.QueryEscape(cl.ID), testToken, "", "")
	if status != 200 || !strings.Contains(string(body), `"applied":2`) {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	for _, c := range []*client{right, wrong} {
		for {
			code := c.checked(1)
			if len(code.Own) == 1 && code.Own[0].Case == "Bob's mistake" {
				break
			}
		}
	}
	if l := list(); len(l.Cases) != 1 || l.Cases[0].Name != "Bob's mistake" {
		t.Fatalf("the list after the removal: %+v", l)
	}
	status, _, body = call(t, ts, "DELETE", "/api/code/cases/"+url.PathEscape("an old deadline")+"?session="+rightID, testToken, "", "")
	if status != 200 || !strings.Contains(string(body), `"unknown_case"`) {
		t.Fatalf("removing it again: %d %s", status, body)
	}
}

// TestStepThroughAndBranch: a student's failure played side by side at
// every step, a branch from step 1 with another delivery, and the branch
// kept as a case of their own.
func TestStepThroughAndBranch(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	id := newID()
	c, _ := dial(t, ts, id)
	play := func(frames string) (int, []byte) {
		status, _, body := call(t, ts, "POST", "/lab/"+id+"/code/play", "", "", `{"frames":`+frames+`}`)
		return status, body
	}
	if status, body := play(`[{"type":"start"}]`); status != 409 || !strings.Contains(string(body), "Check") {
		t.Fatalf("before any program: %d %s", status, body)
	}
	code := c.submit(testdata(t, "wrong/deadline-over-result.js"), 1)
	if code.Failure == nil {
		t.Fatalf("no failure: %s", code.raw)
	}
	failure, _ := json.Marshal(code.Failure.Frames)
	type sides struct {
		Steps []struct {
			Words    string          `json:"words"`
			Differs  bool            `json:"differs"`
			Property string          `json:"property"`
			Expected json.RawMessage `json:"expected"`
			Got      json.RawMessage `json:"got"`
		} `json:"steps"`
	}
	read := func(status int, body []byte) sides {
		t.Helper()
		var s sides
		if err := json.Unmarshal(body, &s); err != nil || status != 200 {
			t.Fatalf("play: %d %s", status, body)
		}
		return s
	}
	s := read(play(string(failure)))
	if len(s.Steps) != len(code.Failure.Frames) {
		t.Fatalf("%d steps for %d frames", len(s.Steps), len(code.Failure.Frames))
	}
	for i, st := range s.Steps {
		if st.Differs != (i == code.Failure.Step) || len(st.Expected) == 0 || len(st.Got) == 0 || st.Words == "" {
			t.Fatalf("step %d of %s: %+v", i, failure, st)
		}
	}
	if s.Steps[code.Failure.Step].Property != "a deadline overwrites a result" {
		t.Fatalf("the failing step: %+v", s.Steps[code.Failure.Step])
	}
	// A branch: a completion, a deadline, the deadline first: the two
	// agree (Pending goes Unresolved), then the completion resolves it.
	branch := `[{"type":"queueReply","raw":"{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"A\"}"},{"type":"queueDeadline"},{"type":"deliver","message":2},{"type":"deliver","message":1},{"type":"deliver","message":2}]`
	s = read(play(branch))
	differs := ""
	for _, st := range s.Steps {
		if st.Differs {
			differs += "x"
		} else {
			differs += "."
		}
	}
	if differs != "....x" {
		t.Fatalf("the branch differs at %q: %+v", differs, s)
	}
	status, _, body := call(t, ts, "POST", "/lab/"+id+"/code/cases", "", "", `{"name":"my deadline after the result","frames":`+branch+`}`)
	if status != 200 {
		t.Fatalf("keeping the branch: %d %s", status, body)
	}
	for {
		code := c.checked(1)
		if len(code.Own) == 1 && code.Own[0].Case == "my deadline after the result" && !code.Own[0].Passed {
			break
		}
	}
}
