package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/server"
)

// versionOnly is a compiler that says which it is and compiles nothing.
type versionOnly string

func (v versionOnly) Compile(context.Context, string) (rescript.Output, error) {
	return rescript.Output{}, &rescript.Error{Kind: rescript.Crashed, Message: "not a compiler"}
}
func (v versionOnly) Version() string { return string(v) }

// TestCodeJSONSaysTheVersionOnce: the compiler calls itself "ReScript
// 12.2.0"; GET /code.json's version is the number alone, as
// docs/protocol.md shows, so that the page's note says "ReScript 12.2.0",
// not "ReScript ReScript 12.2.0" (issue 52).
func TestCodeJSONSaysTheVersionOnce(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{ReScript: versionOnly("ReScript 12.2.0")})
	var langs struct {
		ReScript struct {
			Version string `json:"version"`
		} `json:"rescript"`
	}
	if err := json.NewDecoder(get(t, ts, "/code.json").Body).Decode(&langs); err != nil || langs.ReScript.Version != "12.2.0" {
		t.Fatalf("GET /code.json: version %q, %v; want 12.2.0", langs.ReScript.Version, err)
	}
}

// liveFrame is a compiled, typeAt or error frame of the live compiler.
type liveFrame struct {
	Type        string             `json:"type"`
	ID          *int64             `json:"id"`
	Diagnostics []model.Diagnostic `json:"diagnostics"`
	Text        *string            `json:"text"`
	Error       string             `json:"error"`
	Reason      string             `json:"reason"`
	raw         []byte
}

func (c *client) live() liveFrame {
	c.t.Helper()
	f := c.read()
	var l liveFrame
	if err := json.Unmarshal(f.raw, &l); err != nil {
		c.t.Fatal(err)
	}
	l.raw = f.raw
	if l.ID == nil {
		c.t.Fatalf("got %s, want a frame with an id", f.raw)
	}
	return l
}

func compileFrame(id int, lang, source string) string {
	b, _ := json.Marshal(map[string]any{"type": "compile", "id": id, "language": lang, "source": source})
	return string(b)
}

func typeAtFrame(id int, source string, line, column int) string {
	b, _ := json.Marshal(map[string]any{"type": "typeAt", "id": id, "language": "rescript", "source": source, "line": line, "column": column})
	return string(b)
}

// placeIn is the 1-based line and column of want in src, plus skip.
func placeIn(t *testing.T, src, want string, skip int) (int, int) {
	t.Helper()
	i := strings.Index(src, want)
	if i < 0 {
		t.Fatalf("no %q", want)
	}
	i += skip
	return strings.Count(src[:i], "\n") + 1, i - strings.LastIndex(src[:i], "\n")
}

// noChange: the session changed nothing and submitted nothing: its next
// change is its first, and its state has no code.
func noChange(t *testing.T, c *client) {
	t.Helper()
	if f := c.do(`{"type":"start"}`); f.Seq != 1 || strings.Contains(string(f.raw), `"code"`) {
		t.Fatalf("after live compiles the session changed: %s", f.raw)
	}
}

// TestLiveOverTheProtocol: compile and typeAt frames over a real
// WebSocket, with the real compiler: the lesson's module says nothing,
// the Rejected arm deleted brings warning 8 naming Rejected at view's
// switch, accept's type and a pattern's; a newer ask replaces a waiting
// one; the allowance is the live compiler's own (Check still works past
// it); none of it is a change or a submission.
func TestLiveOverTheProtocol(t *testing.T) {
	comp := rescriptCompiler(t)
	if !comp.Types() {
		t.Fatal("the compiler has no rescript-editor-analysis.exe beside it")
	}
	_, ts := runLab(t, server.Config{ReScript: comp})
	c, _ := dial(t, ts, newID())
	src := lessonRes(t)
	started := time.Now()
	c.send(compileFrame(1, "rescript", src))
	if f := c.live(); f.Type != "compiled" || *f.ID != 1 || f.Diagnostics == nil || len(f.Diagnostics) != 0 {
		t.Fatalf("the lesson's module: %s", f.raw)
	}
	t.Logf("a live compile of the lesson's module: %v", time.Since(started))
	viewAt := strings.Index(src, "let view = ")
	noRejected := src[:viewAt] + strings.Replace(src[viewAt:], "  | Rejected(reason) => (\"Rejected\", reason)\n", "", 1)
	c.send(compileFrame(2, "rescript", noRejected))
	f := c.live()
	switchLine := lineOf(t, noRejected, "  let (status, detail) = switch call.status {")
	if f.Type != "compiled" || *f.ID != 2 || len(nonExhaustive(f.Diagnostics, "Rejected")) != 1 || f.Diagnostics[0].Line != switchLine {
		t.Fatalf("the Rejected arm deleted: %s", f.raw)
	}
	line, col := placeIn(t, src, "let accept", 4)
	c.send(typeAtFrame(3, src, line, col))
	if f := c.live(); f.Type != "typeAt" || *f.ID != 3 || f.Text == nil || *f.Text != "(call, reply) => update" {
		t.Fatalf("accept: %s", f.raw)
	}
	line, col = placeIn(t, src, "Ok(output)", 3)
	c.send(typeAtFrame(4, src, line, col))
	if f := c.live(); f.Type != "typeAt" || *f.Text != "string" {
		t.Fatalf("output in Ok(output): %s", f.raw)
	}
	c.send(typeAtFrame(5, src, 1, 1))
	if f := c.live(); f.Type != "typeAt" || f.Text == nil || *f.Text != "" {
		t.Fatalf("a comment: %s", f.raw)
	}
	// JavaScript: a parse, with the error's place.
	c.send(compileFrame(6, "javascript", "export function begin(runId, callId) {\n  return {call: , notice: \"\"}\n}\n"))
	if f := c.live(); f.Type != "compiled" || len(f.Diagnostics) != 1 || f.Diagnostics[0].Line != 2 || f.Diagnostics[0].Column != 17 || f.Diagnostics[0].Severity != "error" {
		t.Fatalf("a JavaScript syntax error: %s", f.raw)
	}
	// Five different sources at once: the last is answered, each at
	// most once, in order; those replaced while they waited may not be.
	for i := range 5 {
		c.send(compileFrame(10+i, "rescript", src+"// "+strconv.Itoa(i)+"\n"))
	}
	last := int64(0)
	for last != 14 {
		f := c.live()
		if f.Type != "compiled" || *f.ID <= last {
			t.Fatalf("answers out of order, or again: %s after %d", f.raw, last)
		}
		last = *f.ID
	}
	noChange(t, c)
}

// TestLiveAllowance: past its allowance a connection's compiles are
// refused with an error frame carrying the id (rate_limit), which spends
// nothing of the checks': Check is answered as before.
func TestLiveAllowance(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	refused := 0
	for i := range 35 {
		c.send(compileFrame(i, "javascript", "let x = "+strconv.Itoa(i)))
		f := c.live()
		switch {
		case f.Type == "compiled" && *f.ID == int64(i):
		case f.Type == "error" && f.Reason == "rate_limit" && *f.ID == int64(i) && f.Error != "":
			refused++
		default:
			t.Fatalf("compile %d: %s", i, f.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if refused == 0 {
		t.Fatal("35 compiles at once: none refused")
	}
	if f := c.do(submitIn("javascript", "export function begin( {")); codeOf(t, f) == nil || codeOf(t, f).Submission != 1 {
		t.Fatalf("Check after the live allowance ran out: %s", f.raw)
	}
}

// TestLiveWithoutACompiler: without the compiler a ReScript compile is
// refused (unavailable, with its id), a typeAt too; JavaScript is parsed;
// a frame without an id is not the protocol's.
func TestLiveWithoutACompiler(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{})
	c, _ := dial(t, ts, newID())
	c.send(compileFrame(7, "rescript", "let x = 1"))
	if f := c.live(); f.Type != "error" || f.Reason != "unavailable" || *f.ID != 7 {
		t.Fatalf("a ReScript compile: %s", f.raw)
	}
	c.send(typeAtFrame(8, "let x = 1", 1, 5))
	if f := c.live(); f.Type != "error" || f.Reason != "unavailable" || *f.ID != 8 {
		t.Fatalf("a typeAt: %s", f.raw)
	}
	c.send(compileFrame(9, "javascript", "export const begin = () => 1\n"))
	if f := c.live(); f.Type != "compiled" || len(f.Diagnostics) != 0 {
		t.Fatalf("a JavaScript compile: %s", f.raw)
	}
	c.send(`{"type":"compile","source":"x"}`)
	if r := c.refusal(); r.Reason != "invalid_frame" || !strings.Contains(r.Error, `"id"`) {
		t.Fatalf("no id: %s", r.raw)
	}
	noChange(t, c)
}
