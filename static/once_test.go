package static

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestMechanismsLiveOnce checks that the pages keep one copy of what they
// share: the WebSocket with its reconnection and 401 handling (LiveSocket),
// the request to the console's API and the class-scope parser are dom.js's,
// and a page that writes its own again fails here.
func TestMechanismsLiveOnce(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	// The texts are split so that this file does not contain them: a grep
	// of static/ for them finds dom.js alone.
	for _, c := range []struct{ what, text string }{
		{"opens a WebSocket", "new " + "WebSocket("},
		{"defines api()", "function " + "api("},
		{"parses a class scope from the path", `/^\/instructor\/` + `classes\/(`},
	} {
		var in []string
		for name, body := range files {
			if strings.Contains(body, c.text) {
				in = append(in, name)
			}
		}
		slices.Sort(in)
		if !slices.Equal(in, []string{"dom.js"}) {
			t.Errorf("%q %s in %v, want only in dom.js (a page uses dom.js's)", c.text, c.what, in)
		}
	}
}
