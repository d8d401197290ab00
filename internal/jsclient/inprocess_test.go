package jsclient

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
)

// procClient is an instance of the engine in the test's own process, as
// model.Client and model.CallKeyer: the checker's view of a module without
// the sandbox's pipe, for the mutation suite and the benchmarks.
type procClient struct{ in *instance }

func (c procClient) Begin(runID, callID string) (model.ClientCall, error) {
	return c.in.begin(runID, callID)
}

func (c procClient) Receive(call model.ClientCall, raw string) (model.ClientCall, string, error) {
	id, notice, err := c.in.update(1, call.(int), raw)
	return id, notice, err
}

func (c procClient) Expire(call model.ClientCall, runID, callID string) (model.ClientCall, string, error) {
	id, notice, err := c.in.update(2, call.(int), runID, callID)
	return id, notice, err
}

func (c procClient) View(call model.ClientCall) (json.RawMessage, error) {
	return c.in.view(call.(int))
}

func (c procClient) CallKey(call model.ClientCall) (string, error) {
	b, err := c.in.callKey(call.(int))
	return string(b), err
}

// inProcessBudget is no budget to speak of: in the test's process a
// call's time is wall time, which a loaded machine stretches past 50 ms.
var inProcessBudget = Budget{Total: 1 << 62, PerCall: time.Hour}

// inProcess compiles src for the test's own process and returns a
// model.NewClient of fresh instances.
func inProcess(t testing.TB, src string) model.NewClient {
	t.Helper()
	p, err := compileSource(src, inProcessBudget)
	if err != nil {
		t.Fatal(err)
	}
	return func() (model.Client, error) {
		in, err := p.newInstance()
		if err != nil {
			return nil, err
		}
		return procClient{in}, nil
	}
}

// The call's JSON is its identity; a value JSON would not write
// faithfully has none.
func TestCallKey(t *testing.T) {
	for _, tc := range []struct {
		name, begin string
		want        string // "" for refused
		inMessage   string
	}{
		{"a plain record", `return {key: {runId, callId}, status: "Pending"}`, `{"key":{"runId":"run-1","callId":"lookup"},"status":"Pending"}`, ""},
		{"an array", `return [runId, callId, 1.5, null, true]`, `["run-1","lookup",1.5,null,true]`, ""},
		{"a function", `return {runId, f() {}}`, "", "a function"},
		{"undefined", `return {runId, detail: undefined}`, "", "undefined"},
		{"NaN", `return {runId, n: NaN}`, "", "not finite"},
		{"a Map", `return {runId, m: new Map()}`, "", "class"},
		{"a class", `class C {}; return new C()`, "", "class"},
		{"a cycle", `const o = {runId}; o.self = o; return o`, "", "cannot be written"},
		{"a symbol", `return {runId, s: Symbol("x")}`, "", "symbol"},
		{"too large", `return {runId, big: "x".repeat(70000)}`, "", "longer than 64 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "export function begin(runId, callId) { " + tc.begin + " }\n" +
				"export function receive(call, raw) { return {call, notice: raw}; }\n" +
				"export function expire(call) { return {call, notice: \"\"}; }\n" +
				"export function view(call) { return {}; }\n"
			for _, via := range []string{"in process", "sandbox"} {
				var nc model.NewClient
				if via == "sandbox" {
					nc, _ = load(t, src, Budget{})
				} else {
					nc = inProcess(t, src)
				}
				c, err := nc()
				if err != nil {
					t.Fatal(err)
				}
				call, err := c.Begin("run-1", "lookup")
				if err != nil {
					t.Fatal(err)
				}
				key, err := c.(model.CallKeyer).CallKey(call)
				var ce *CallError
				switch {
				case tc.want != "" && (err != nil || key != tc.want):
					t.Errorf("%s: CallKey = %q, %v; want %q", via, key, err, tc.want)
				case tc.want == "" && (!errors.As(err, &ce) || !strings.Contains(ce.Message, tc.inMessage) || errors.Is(err, model.ErrStop)):
					t.Errorf("%s: CallKey = %q, %v; want a refusal saying %q", via, key, err, tc.inMessage)
				}
			}
		})
	}
}
