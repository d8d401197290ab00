package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestBenchmarksTableKeepsTheGoals holds BENCHMARKS.md's first table (today's
// figures) to the goals labbench checks: every row of labbench with a goal
// is there with that goal, and every goal there is one labbench checks.
// A row is written | `scenario` | `metric` | goal | …, the goal as
// labbench prints it.
func TestBenchmarksTableKeepsTheGoals(t *testing.T) {
	var stderr bytes.Buffer
	b, err := parseFlags([]string{"labbench"}, func(string) string { return "" }, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, rw := range rows(b) {
		if rw.goal != (goal{}) {
			want["`"+rw.scenario+"` | `"+rw.metric+"`"] = rw.goal.String()
		}
	}
	text, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	inTable := false
	for _, line := range strings.Split(string(text), "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the first table ends
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue // the header and its rule
		}
		key := strings.TrimSpace(cells[0]) + " | " + strings.TrimSpace(cells[1])
		got[key] = strings.TrimSpace(cells[2])
	}
	if len(got) == 0 {
		t.Fatal("BENCHMARKS.md opens with no table of goals")
	}
	for k, g := range want {
		if got[k] != g {
			t.Errorf("BENCHMARKS.md's table: %s has goal %q, labbench checks %q", k, got[k], g)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("BENCHMARKS.md's table: %s is no goal of labbench's", k)
		}
	}
}
