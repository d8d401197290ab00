package model

import (
	"errors"
	"testing"
)

func TestParseReply(t *testing.T) {
	t.Parallel()
	key := Key{RunID: "run-1", CallID: "lookup"}
	tests := []struct {
		name string
		raw  string
		want Reply
		err  error
	}{
		{"completion", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`, Reply{Key: key, Outcome: Completion, Text: "x"}, nil},
		{"rejection", `{"runId":"run-1","callId":"lookup","kind":"rejected","reason":"The query is empty"}`, Reply{Key: key, Outcome: Rejection, Text: "The query is empty"}, nil},
		{"empty output is a completion", `{"runId":"run-1","callId":"lookup","kind":"completed","output":""}`, Reply{Key: key, Outcome: Completion}, nil},
		{"empty identifiers are strings", `{"runId":"","callId":"","kind":"completed","output":"x"}`, Reply{Outcome: Completion, Text: "x"}, nil},
		{"extra fields ignored", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x","reason":5,"extra":[1,{}]}`, Reply{Key: key, Outcome: Completion, Text: "x"}, nil},
		{"rejected with output too", `{"runId":"run-1","callId":"lookup","kind":"rejected","output":"x","reason":"r"}`, Reply{Key: key, Outcome: Rejection, Text: "r"}, nil},
		{"last duplicate wins", `{"runId":"run-9","runId":"run-1","callId":"lookup","kind":"rejected","kind":"completed","output":"x"}`, Reply{Key: key, Outcome: Completion, Text: "x"}, nil},
		{"escaped key", `{"run\u0049d":"run-1","callId":"lookup","kind":"completed","output":"x"}`, Reply{Key: key, Outcome: Completion, Text: "x"}, nil},
		{"no trimming", `{"runId":" run-1","callId":"lookup","kind":"completed","output":" x "}`, Reply{Key: Key{RunID: " run-1", CallID: "lookup"}, Outcome: Completion, Text: " x "}, nil},
		{"markup stays text", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"<strong>Found it</strong>"}`, Reply{Key: key, Outcome: Completion, Text: "<strong>Found it</strong>"}, nil},
		{"huge number elsewhere", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x","n":1e400}`, Reply{Key: key, Outcome: Completion, Text: "x"}, nil},
		{"whitespace around", " \t\r\n{\"runId\":\"run-1\",\"callId\":\"lookup\",\"kind\":\"completed\",\"output\":\"x\"}\n ", Reply{Key: key, Outcome: Completion, Text: "x"}, nil},

		{"lone brace", `{`, Reply{}, ErrInvalidJSON},
		{"empty", ``, Reply{}, ErrInvalidJSON},
		{"trailing data", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"} x`, Reply{}, ErrInvalidJSON},
		{"single quotes", `{'runId':'run-1'}`, Reply{}, ErrInvalidJSON},
		{"trailing comma", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x",}`, Reply{}, ErrInvalidJSON},
		{"byte order mark", "\ufeff{}", Reply{}, ErrInvalidJSON},
		{"non-breaking space", "\u00a0{}", Reply{}, ErrInvalidJSON},

		{"numeric output", `{"runId":"run-1","callId":"lookup","kind":"completed","output":42}`, Reply{}, ErrInvalidReply},
		{"null output", `{"runId":"run-1","callId":"lookup","kind":"completed","output":null}`, Reply{}, ErrInvalidReply},
		{"missing output", `{"runId":"run-1","callId":"lookup","kind":"completed","reason":"r"}`, Reply{}, ErrInvalidReply},
		{"missing reason", `{"runId":"run-1","callId":"lookup","kind":"rejected","output":"x"}`, Reply{}, ErrInvalidReply},
		{"unknown kind", `{"runId":"run-1","callId":"lookup","kind":"cancelled","output":"x"}`, Reply{}, ErrInvalidReply},
		{"kind is case-sensitive", `{"runId":"run-1","callId":"lookup","kind":"Completed","output":"x"}`, Reply{}, ErrInvalidReply},
		{"keys are case-sensitive", `{"runid":"run-1","callId":"lookup","kind":"completed","output":"x"}`, Reply{}, ErrInvalidReply},
		{"numeric run id", `{"runId":1,"callId":"lookup","kind":"completed","output":"x"}`, Reply{}, ErrInvalidReply},
		{"missing call id", `{"runId":"run-1","kind":"completed","output":"x"}`, Reply{}, ErrInvalidReply},
		{"last duplicate is not a string", `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x","output":1}`, Reply{}, ErrInvalidReply},
		{"array", `[{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}]`, Reply{}, ErrInvalidReply},
		{"string", `"completed"`, Reply{}, ErrInvalidReply},
		{"number", `1e400`, Reply{}, ErrInvalidReply},
		{"null", `null`, Reply{}, ErrInvalidReply},
		{"empty object", `{}`, Reply{}, ErrInvalidReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseReply(tt.raw)
			if !errors.Is(err, tt.err) {
				t.Fatalf("ParseReply(%q) error = %v, want %v", tt.raw, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("ParseReply(%q) = %+v, want %+v", tt.raw, got, tt.want)
			}
		})
	}
}

func TestDiagnosticTexts(t *testing.T) {
	t.Parallel()
	if got := Receive(Begin("run-1", "lookup"), "{").Notice; got != "Invalid JSON: could not parse message." {
		t.Errorf("invalid JSON notice = %q", got)
	}
	if got := Receive(Begin("run-1", "lookup"), "[]").Notice; got != "Invalid reply: expected string identifiers and a completed output or rejected reason." {
		t.Errorf("invalid reply notice = %q", got)
	}
}

func TestAccept(t *testing.T) {
	t.Parallel()
	key := Key{RunID: "run-2", CallID: "lookup"}
	other := []Key{{RunID: "run-1", CallID: "lookup"}, {RunID: "run-2", CallID: "other"}, {RunID: "", CallID: ""}, {RunID: "run-2 ", CallID: "lookup"}}
	calls := map[string]Call{
		"pending":    {Key: key, Status: Pending},
		"unresolved": {Key: key, Status: Unresolved},
		"completed":  {Key: key, Status: Completed, Text: "New answer"},
		"rejected":   {Key: key, Status: Rejected, Text: "no"},
	}
	completion := Reply{Key: key, Outcome: Completion, Text: "out"}
	rejection := Reply{Key: key, Outcome: Rejection, Text: "why"}
	tests := []struct {
		call  string
		reply Reply
		want  Update
	}{
		{"pending", completion, Update{Call{Key: key, Status: Completed, Text: "out"}, "Accepted completion."}},
		{"pending", rejection, Update{Call{Key: key, Status: Rejected, Text: "why"}, "Accepted rejection."}},
		{"unresolved", completion, Update{Call{Key: key, Status: Completed, Text: "out"}, "Accepted completion."}},
		{"unresolved", rejection, Update{Call{Key: key, Status: Rejected, Text: "why"}, "Accepted rejection."}},
		{"completed", completion, Update{calls["completed"], "Ignored reply: final outcome already recorded."}},
		{"completed", rejection, Update{calls["completed"], "Ignored reply: final outcome already recorded."}},
		{"rejected", completion, Update{calls["rejected"], "Ignored reply: final outcome already recorded."}},
		{"rejected", rejection, Update{calls["rejected"], "Ignored reply: final outcome already recorded."}},
		{"pending", Reply{Key: key, Outcome: Completion}, Update{Call{Key: key, Status: Completed}, "Accepted completion."}},
	}
	for _, tt := range tests {
		if got := Accept(calls[tt.call], tt.reply); got != tt.want {
			t.Errorf("Accept(%s, %+v) = %+v, want %+v", tt.call, tt.reply, got, tt.want)
		}
	}
	for name, c := range calls {
		for _, k := range other {
			for _, r := range []Reply{{Key: k, Outcome: Completion, Text: "x"}, {Key: k, Outcome: Rejection, Text: "x"}} {
				if got := Accept(c, r); got != (Update{c, "Ignored reply: different call identity."}) {
					t.Errorf("Accept(%s, %+v) = %+v, want the call unchanged", name, r, got)
				}
			}
		}
	}
}

func TestExpire(t *testing.T) {
	t.Parallel()
	key := Key{RunID: "run-3", CallID: "lookup"}
	tests := []struct {
		call Call
		key  Key
		want Update
	}{
		{Call{Key: key}, key, Update{Call{Key: key, Status: Unresolved}, "Unresolved: deadline observed without a final reply."}},
		{Call{Key: key, Status: Unresolved}, key, Update{Call{Key: key, Status: Unresolved}, "Still unresolved: no final reply."}},
		{Call{Key: key, Status: Completed, Text: "a"}, key, Update{Call{Key: key, Status: Completed, Text: "a"}, "Ignored deadline: final outcome already recorded."}},
		{Call{Key: key, Status: Rejected, Text: "r"}, key, Update{Call{Key: key, Status: Rejected, Text: "r"}, "Ignored deadline: final outcome already recorded."}},
		{Call{Key: key}, Key{RunID: "run-2", CallID: "lookup"}, Update{Call{Key: key}, "Ignored deadline: different call identity."}},
		{Call{Key: key}, Key{RunID: "run-3", CallID: "Lookup"}, Update{Call{Key: key}, "Ignored deadline: different call identity."}},
		{Call{Key: key, Status: Completed, Text: "a"}, Key{RunID: "run-1", CallID: "lookup"}, Update{Call{Key: key, Status: Completed, Text: "a"}, "Ignored deadline: different call identity."}},
	}
	for _, tt := range tests {
		if got := Expire(tt.call, tt.key); got != tt.want {
			t.Errorf("Expire(%+v, %+v) = %+v, want %+v", tt.call, tt.key, got, tt.want)
		}
	}
}

func TestView(t *testing.T) {
	t.Parallel()
	key := Key{RunID: "run-1", CallID: "lookup"}
	tests := []struct {
		call Call
		want CallView
	}{
		{Call{Key: key}, CallView{"run-1", "lookup", "Pending", ""}},
		{Call{Key: key, Status: Completed, Text: "New answer"}, CallView{"run-1", "lookup", "Completed", "New answer"}},
		{Call{Key: key, Status: Completed}, CallView{"run-1", "lookup", "Completed", ""}},
		{Call{Key: key, Status: Rejected, Text: "The query is empty"}, CallView{"run-1", "lookup", "Rejected", "The query is empty"}},
		{Call{Key: key, Status: Unresolved}, CallView{"run-1", "lookup", "Unresolved", "No final reply observed. A matching late reply can still resolve this call."}},
	}
	for _, tt := range tests {
		if got := tt.call.View(); got != tt.want {
			t.Errorf("%+v.View() = %+v, want %+v", tt.call, got, tt.want)
		}
	}
}

// FuzzReceive checks the transition rules on any input: diagnostics and
// replies for another identity never change the call, a final call never
// changes, and only an accepted notice changes anything.
func FuzzReceive(f *testing.F) {
	for _, s := range []string{
		`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`,
		`{"runId":"run-1","callId":"lookup","kind":"rejected","reason":"r"}`,
		`{"runId":"run-2","callId":"lookup","kind":"completed","output":"x"}`,
		`{`, `[]`, `{"runId":"run-1","callId":"lookup","kind":"completed","output":1}`,
	} {
		for st := range 4 {
			f.Add(s, uint8(st), "run-1", "lookup")
		}
	}
	f.Fuzz(func(t *testing.T, raw string, status uint8, runID, callID string) {
		c := Call{Key: Key{RunID: "run-1", CallID: "lookup"}, Status: Status(status % 4)}
		if c.Status.Final() {
			c.Text = "first"
		}
		u := Receive(c, raw)
		r, err := ParseReply(raw)
		switch {
		case err != nil:
			if u.Call != c || u.Notice != err.Error() {
				t.Fatalf("diagnostic changed the call: %+v -> %+v", c, u)
			}
		case r.Key != c.Key || c.Status.Final():
			if u.Call != c {
				t.Fatalf("reply %+v changed %+v to %+v", r, c, u.Call)
			}
		default:
			if u.Call.Key != c.Key || !u.Call.Status.Final() || u.Call.Text != r.Text {
				t.Fatalf("reply %+v was not accepted by %+v: %+v", r, c, u)
			}
		}
		e := Expire(u.Call, Key{RunID: runID, CallID: callID})
		if u.Call.Status.Final() && e.Call != u.Call {
			t.Fatalf("deadline changed a final call: %+v -> %+v", u.Call, e.Call)
		}
		if e.Call.Key != u.Call.Key {
			t.Fatalf("deadline changed the identity: %+v", e.Call)
		}
	})
}
