package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

// FuzzDecodeLiveFrame: any bytes decoded as a student's frame are a
// command, a compile or typeAt that agrees with encoding/json's reading
// of the same frame (its id, language, source and place), or a frame
// error; never a panic. A compile or typeAt is never a command.
func FuzzDecodeLiveFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"compile","id":1,"language":"rescript","source":"let x = 1"}`,
		`{"type":"compile","id":2,"source":"export function begin( {"}`,
		`{"type":"compile","id":9007199254740991,"language":"javascript","source":""}`,
		`{"type":"compile","id":9007199254740992,"source":""}`, `{"type":"compile","id":-1,"source":""}`,
		`{"type":"compile","id":1.5,"source":""}`, `{"type":"compile","id":"1","source":""}`, `{"type":"compile","source":""}`,
		`{"type":"compile","id":1,"language":"typescript","source":""}`, `{"type":"compile","id":1,"source":null}`,
		`{"type":"typeAt","id":3,"language":"rescript","source":"let x = 1","line":1,"column":5}`,
		`{"type":"typeAt","id":3,"language":"rescript","source":"","line":0,"column":5}`,
		`{"type":"typeAt","id":3,"language":"rescript","source":"","line":1e3,"column":2.0}`,
		`{"type":"typeAt","id":3,"source":"","line":1}`, `{"type":"typeAt","id":3,"source":"","line":1,"column":1048577}`,
		`{"type":"compile","id":1,"source":"` + strings.Repeat("\\u0061", model.MaxSourceBytes/6+1) + `"}`,
		`{"type":"start"}`, `{"type":"submitCode","source":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, ask, err := decodeStudentFrame(data, model.Student)
		if err != nil {
			var fe *Error
			var le *model.LimitError
			if errors.As(err, &le) && classify(nil, err).reason == "limit" {
				return
			}
			if !errors.As(err, &fe) || fe.Reason != "invalid_frame" {
				t.Fatalf("error %v is not a frame error", err)
			}
			return
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(data, &members); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		var typ string
		if err := json.Unmarshal(members["type"], &typ); err != nil {
			t.Fatalf("type %s", members["type"])
		}
		if ask == nil {
			if typ == "compile" || typ == "typeAt" || frameType(cmd.Kind) != typ {
				t.Fatalf("type %q decoded as the command %q", typ, frameType(cmd.Kind))
			}
			return
		}
		if ask.frameType() != typ {
			t.Fatalf("type %q decoded as %q", typ, ask.frameType())
		}
		var id float64
		var source string
		if json.Unmarshal(members["id"], &id) != nil || float64(ask.id) != id || ask.id < 0 || ask.id > maxLiveID {
			t.Fatalf("id %s decoded as %d", members["id"], ask.id)
		}
		if json.Unmarshal(members["source"], &source) != nil || source != ask.source || len(source) > model.MaxSourceBytes {
			t.Fatalf("source %.100s decoded as %.100q", members["source"], ask.source)
		}
		if l, ok := members["language"]; ok {
			var word string
			if json.Unmarshal(l, &word) != nil || ask.lang.String() != word {
				t.Fatalf("language %s decoded as %v", l, ask.lang)
			}
		} else if ask.lang != model.JavaScript {
			t.Fatalf("no language decoded as %v", ask.lang)
		}
		if ask.typeAt {
			var line, column float64
			if json.Unmarshal(members["line"], &line) != nil || json.Unmarshal(members["column"], &column) != nil ||
				float64(ask.line) != line || float64(ask.column) != column || ask.line < 1 || ask.column < 1 || ask.line > maxLivePlace || ask.column > maxLivePlace {
				t.Fatalf("place %s:%s decoded as %d:%d", members["line"], members["column"], ask.line, ask.column)
			}
		}
		// decodeFrame, which reads commands only, refuses it.
		if _, err := decodeFrame(data, model.Student); err == nil {
			t.Fatalf("decodeFrame took %s", data)
		}
	})
}

// TestParseJS: esbuild's syntax errors as the compiler's messages, their
// columns as the editor counts them.
func TestParseJS(t *testing.T) {
	if ds := parseJS("export function begin(runId, callId) { return 1 }\n"); len(ds) != 0 {
		t.Fatalf("a module that parses: %+v", ds)
	}
	ds := parseJS("export function begin( {\n  return 1\n}\n")
	if len(ds) != 1 || ds[0].Line != 2 || ds[0].Column != 10 || ds[0].EndColumn != 10 || ds[0].Severity != model.SeverityError || ds[0].Warning != nil || ds[0].Text == "" {
		t.Fatalf("a syntax error: %+v", ds)
	}
	ds = parseJS("const s = \"é😀\"; let = ;\n")
	if len(ds) != 1 || ds[0].Column != len(utf16Of("const s = \"é😀\"; let = "))+1 {
		t.Fatalf("after non-ASCII text: %+v", ds)
	}
	// Deep nesting parses without harm.
	if ds := parseJS("let x = " + strings.Repeat("(", 30000) + "1" + strings.Repeat(")", 30000) + ";"); len(ds) != 0 {
		t.Fatalf("deep nesting: %+v", ds[0])
	}
}

func utf16Of(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			out = append(out, 0, 0)
		} else {
			out = append(out, 0)
		}
	}
	return out
}
