package jsclient

import (
	"strings"
	"testing"
)

func TestRewriteKeepsPlacesAndFindsExports(t *testing.T) {
	src := "const s = \"export { no }\"; // export function not() {}\n" +
		"/* import x from 'y' */ const r = /}/g, t = `${ { a: 1 }.a } export {z}`;\n" +
		"export function begin() {}\nexport async function receive() {}\n" +
		"function e() {} function v() {}\nexport { e as expire, v as \"view\" };\n"
	rw, err := rewrite(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.script) != len(src) || strings.Count(rw.script, "\n") != strings.Count(src, "\n") {
		t.Fatalf("the script's places moved:\n%s", rw.script)
	}
	want := map[string]string{"begin": "begin", "receive": "receive", "expire": "e", "view": "v"}
	for k, v := range want {
		if rw.local[k] != v {
			t.Fatalf("local[%q] = %q, want %q (all: %v)", k, rw.local[k], v, rw.local)
		}
	}
	if strings.Contains(rw.script, "export {") && !strings.Contains(rw.script, "\"export { no }\"") {
		t.Fatalf("an export left in the script:\n%s", rw.script)
	}
	if _, err := compileSource(src, Budget{}); err != nil {
		t.Fatalf("compile: %v", err)
	}
}

// The loader never panics, and whatever it accepts keeps every line and
// column where the source had it.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{plainFunctions, "export { a as b, c };", "import x from 'y'", "export default 1",
		"`${`${}`}`", "/[/]/ export function f(){}", "export const", "export {", "a = b / c / d; export function f(){}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		rw, err := rewrite(src)
		if err != nil {
			if _, ok := err.(*SourceError); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		if len(rw.script) != len(src) {
			t.Fatalf("length %d, source %d", len(rw.script), len(src))
		}
		for i := range src {
			if (src[i] == '\n') != (rw.script[i] == '\n') {
				t.Fatalf("a line moved at %d", i)
			}
		}
		_, _ = compileSource(src, Budget{})
	})
}
