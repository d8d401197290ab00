package rescript

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseDiagnostics: whatever the compiler prints, the messages read
// from it are in range, and a message is never lost to a longer text.
func FuzzParseDiagnostics(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "messages", "*.txt"))
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("  Warning number 8 (configured as error) \n  ToolCall.res:104:26-112:3\n\n  104 │ x\n\n  You forgot to handle a possible case here, for example: \n  | Rejected(_)\n")
	f.Add("  Syntax error!\n  S.res:1:14-2:0\n")
	f.Add("  We've found a bug for you!\n  T.res:99999999999999999999:1\n")
	f.Fuzz(func(t *testing.T, out string) {
		ds := ParseDiagnostics(out)
		if len(ds) > maxDiagnostics {
			t.Fatalf("%d diagnostics", len(ds))
		}
		for _, d := range ds {
			if d.Line < 1 || d.Column < 1 || d.EndLine < d.Line || d.EndLine == d.Line && d.EndColumn < d.Column || d.EndColumn < 1 {
				t.Fatalf("range %+v", d)
			}
			if d.Severity != "error" && d.Severity != "warning" || d.Severity == "warning" && d.Warning == nil {
				t.Fatalf("severity %+v", d)
			}
			if len(d.Text) > maxText+len("…") {
				t.Fatalf("text of %d bytes", len(d.Text))
			}
		}
	})
}

func TestParseDiagnostics(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "messages", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		file string
		want []string // line:col-endLine:endCol warning severity, and a word of the text
	}{
		{"V.txt", []string{"104:26-112:3 w8 error | Rejected(_)"}},
		{"colour.txt", []string{"104:26-112:3 w8 warning | Rejected(_)"}},
		{"T.txt", []string{"2:21-2:21 w- error string concatenation"}},
		{"W.txt", []string{"2:7-2:7 w26 error unused variable y.", "5:51-5:54 w11 error this match case is unused."}},
		{"S.txt", []string{"1:14-2:1 w- error Missing expression"}},
		// Cancelled added to the lesson's status: the frame of accept's
		// match wraps a long line of the source, a line with "│" and no
		// number, which is no part of the explanation (issue 52).
		{"wrapped.txt", []string{"63:5-76:5 w8 error | Cancelled", "90:5-100:5 w8 error | Cancelled", "105:26-113:3 w8 error | Cancelled"}},
	} {
		ds := ParseDiagnostics(read(tc.file))
		if len(ds) != len(tc.want) {
			t.Errorf("%s: %d diagnostics, want %d: %+v", tc.file, len(ds), len(tc.want), ds)
			continue
		}
		for i, d := range ds {
			w := "w-"
			if d.Warning != nil {
				w = "w" + strconv.Itoa(*d.Warning)
			}
			got := fmt.Sprintf("%d:%d-%d:%d %s %s", d.Line, d.Column, d.EndLine, d.EndColumn, w, d.Severity)
			head, word, _ := strings.Cut(tc.want[i], " "+d.Severity+" ")
			if got != head+" "+d.Severity || !strings.Contains(d.Text, word) || strings.Contains(d.Text, "│") || strings.Contains(d.Text, "outcome already") {
				t.Errorf("%s #%d: %s %q, want %s", tc.file, i, got, d.Text, tc.want[i])
			}
		}
	}
}
