package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// TestCheckBurstFlags: the scenario is asked for by name, 30 sessions by
// default (3 in -short), the lesson's module and a wrong one.
func TestCheckBurstFlags(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	env := func(string) string { return "" }
	b, err := parseFlags([]string{"labbench"}, env, &stderr)
	if err != nil || slices.Contains(b.scenarios, "check-burst") {
		t.Fatalf("defaults: %v, %v", b.scenarios, err)
	}
	b, err = parseFlags([]string{"labbench", "-scenarios", "check-burst"}, env, &stderr)
	if err != nil || b.burstSessions != 30 || !slices.Equal(b.burstModules, defaultBurstModules) {
		t.Fatalf("-scenarios check-burst: %+v, %v", b, err)
	}
	b, err = parseFlags([]string{"labbench", "-short", "-scenarios", "check-burst", "-burst-modules", " a.js, b.res ,"}, env, &stderr)
	if err != nil || b.burstSessions != 3 || !slices.Equal(b.burstModules, []string{"a.js", "b.res"}) {
		t.Fatalf("-short: %+v, %v", b, err)
	}
	if _, err := parseFlags([]string{"labbench", "-burst-sessions", "0"}, env, &stderr); err == nil {
		t.Fatal("-burst-sessions 0 was taken")
	}
	mods, err := burstModulesOf(defaultBurstModules)
	if err != nil || len(mods) != 2 || mods[0].name != "ToolCall.res" || mods[0].source == "" || mods[1].language != "" {
		t.Fatalf("the default modules: %+v, %v", mods, err)
	}
}

// TestSubmitCodeFrame: JavaScript's frame names no language (as today's
// lab takes it); a .res module's names "rescript".
func TestSubmitCodeFrame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, want string }{
		{"internal/jsclient/testdata/ToolCall.res.js", ""},
		{"x/ToolCall.res", "rescript"},
	} {
		frame, err := submitCodeFrame("src", languageOf(tc.path))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]string
		if err := json.Unmarshal(frame, &f); err != nil {
			t.Fatal(err)
		}
		lang, named := f["language"]
		if f["type"] != "submitCode" || f["source"] != "src" || lang != tc.want || named != (tc.want != "") {
			t.Fatalf("%s: %s", tc.path, frame)
		}
	}
}
