package model

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// shivizRegexp is ShiViz's default parser regex, in Go's spelling of named
// groups.
var shivizRegexp = regexp.MustCompile(`(?P<event>.*)\n(?P<host>\S*) (?P<clock>{.*})`)

type shivizEvent struct {
	text, host string
	clock      map[string]int
}

// parseShiViz reads a log as ShiViz would, failing the test on anything
// the regex leaves over or a clock that is not a JSON object of counts.
func parseShiViz(t *testing.T, log string) []shivizEvent {
	t.Helper()
	var out []shivizEvent
	end := 0
	for _, m := range shivizRegexp.FindAllStringSubmatchIndex(log, -1) {
		if gap := log[end:m[0]]; strings.TrimSpace(gap) != "" {
			t.Fatalf("the regex skips %q", gap)
		}
		end = m[1]
		e := shivizEvent{text: log[m[2]:m[3]], host: log[m[4]:m[5]]}
		if err := json.Unmarshal([]byte(log[m[6]:m[7]]), &e.clock); err != nil {
			t.Fatalf("clock %q: %v", log[m[6]:m[7]], err)
		}
		out = append(out, e)
	}
	if rest := log[end:]; strings.TrimSpace(rest) != "" {
		t.Fatalf("the regex leaves %q", rest)
	}
	return out
}

// before reports whether clock a happened before b: a ≤ b and a ≠ b.
func before(a, b map[string]int) bool {
	for h, n := range a {
		if b[h] < n {
			return false
		}
	}
	for h, n := range b {
		if a[h] != n {
			return true
		}
	}
	return false
}

func TestShiVizLog(t *testing.T) {
	t.Parallel()
	trace := append(seedTrace(),
		injectReply("two\nlines\n"+`client {"client": 99}`, true), // a reply that looks like a host line
		queue(`{"runId":"run-7","callId":"lookup","kind":"completed","output":"held\r\x01"}`))
	d, err := DiagramOfTrace(trace, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	events := parseShiViz(t, string(ShiVizLog(d)))
	// One event per message sent and per delivery, two per run started.
	if want := 2*(len(d.Lanes)-1) + len(d.Messages) + len(d.Arrivals); len(events) != want {
		t.Fatalf("%d events, want %d", len(events), want)
	}
	last := map[string]map[string]int{}
	sendOf := map[string]map[string]int{} // "message 3", "run-2": the sending event's clock
	for i, e := range events {
		if e.host != "client" && !strings.HasPrefix(e.host, "run-") {
			t.Fatalf("event %d on host %q", i, e.host)
		}
		prev := last[e.host]
		if e.clock[e.host] != prev[e.host]+1 {
			t.Errorf("event %d %q: %s's own count %d after %d", i, e.text, e.host, e.clock[e.host], prev[e.host])
		}
		if prev != nil && !before(prev, e.clock) {
			t.Errorf("event %d %q: %s's clock %v does not grow from %v", i, e.text, e.host, e.clock, prev)
		}
		last[e.host] = e.clock
		words := strings.Fields(e.text)
		switch {
		case words[0] == "send":
			sendOf["message "+words[2]] = e.clock
		case words[0] == "start":
			sendOf[words[1]] = e.clock
		case words[0] == "deliver", len(words) == 2 && words[1] == "started":
			key := e.host
			if words[0] == "deliver" {
				key = "message " + words[2]
			}
			s, ok := sendOf[key]
			if !ok {
				t.Fatalf("event %d %q received before it was sent", i, e.text)
			}
			if !before(s, e.clock) {
				t.Errorf("event %d %q: clock %v not after its send's %v", i, e.text, e.clock, s)
			}
		default:
			t.Errorf("event %d: %q", i, e.text)
		}
	}
	// The lesson's picture: run-1's held reply was sent concurrently with
	// the client's start of run-2, and is delivered after it.
	if old, start := sendOf["message 1"], sendOf["run-2"]; before(old, start) || before(start, old) {
		t.Errorf("run-1's reply %v and the start of run-2 %v are ordered", old, start)
	}
	if log := string(ShiVizLog(d)); !strings.Contains(log, `): two\nlines\nclient {"client": 99}`+"\n") || strings.Contains(log, "\x01") {
		t.Errorf("the reply's line breaks and control characters are not escaped:\n%s", log)
	}
}

func TestShiVizLogEmpty(t *testing.T) {
	t.Parallel()
	d, _ := DiagramOfTrace(nil, Limits{})
	got := string(ShiVizLog(d))
	want := "start run-1 (by student)\nclient {\"client\": 1}\nrun-1 started\nrun-1 {\"client\": 1, \"run-1\": 1}\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestShiVizLogDocumented: docs/export.md's example is what ShiVizLog writes.
func TestShiVizLogDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/export.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## ShiViz log")
	blocks := strings.Split(section, "```\n")
	if !ok || len(blocks) < 4 {
		t.Fatal("no example in docs/export.md's ShiViz section")
	}
	d, err := DiagramOfTrace([]Command{queue(completion("run-1", "Old answer")), start(), queue(completion("run-2", "New answer")), deliver(2), deliver(1)}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ShiVizLog(d)); got != blocks[3] {
		t.Fatalf("ShiVizLog writes\n%s\ndocs/export.md shows\n%s", got, blocks[3])
	}
}
