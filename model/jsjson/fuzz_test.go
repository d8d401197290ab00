package jsjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that Parse never panics, is deterministic, treats strings
// and bytes alike, and agrees with encoding/json, whose grammar is the same.
func FuzzParse(f *testing.F) {
	seeds := []string{
		``, ` `, `{}`, `[]`, `""`, `null`, `true`, `false`, `0`, `-0`, `1e400`, `-1.5E-7`, `01`, `1.`, `-`,
		`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`,
		`{"runId":"run-1","callId":"lookup","kind":"rejected","reason":"no\n\"quote\"\u00e9\ud83d\ude00"}`,
		`{"type":"queueReply","raw":"{\"runId\":\"run-1\"}","message":7}`,
		`{"a":1,"a":"x"}`, `{"run\u0049d":"x"}`, `{"__proto__":{}}`, `{"\ud800":1,"\udbff":2}`,
		`"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\ude00"`, `"\u00"`, `"\x"`, "\"\x00\"", "\"\xff\"",
		"{\"\xff\":\"\xc3\"}", `{"a":[1,{"b":[{}]}],"c":{"d":"e"}}`, `[1,]`, `{"a":1,}`, `{"a" 1}`,
		"\ufeff{}", "{}\u00a0", "\v1", " \t\n\r{ } ", `[[[[[[[[[[]]]]]]]]]]`, `[[[[`, `{"a":{"b":{"c":`,
		strings.Repeat(`[{"k":`, 70) + `0` + strings.Repeat(`}]`, 70),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, v := range loadVectors(f) {
		f.Add([]byte(v.Input))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		v2, err2 := Parse(data)
		vs, errs := Parse(string(data))
		if !reflect.DeepEqual(v, v2) || !reflect.DeepEqual(v, vs) ||
			fmt.Sprint(err) != fmt.Sprint(err2) || fmt.Sprint(err) != fmt.Sprint(errs) {
			t.Fatalf("Parse(%q) not deterministic: %+v %v / %+v %v / %+v %v", data, v, err, v2, err2, vs, errs)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) || se.Expected == "" || !reflect.DeepEqual(v, Value{}) {
				t.Fatalf("Parse(%q) = %+v, %#v", data, v, err)
			}
		}
		// encoding/json stops at depth 10000; V8 and Parse do not.
		if bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) >= 10000 {
			return
		}
		// encoding/json, like Parse, ignores UTF-8 validity, so this holds
		// for every input, not only valid UTF-8.
		if (err == nil) != json.Valid(data) {
			t.Fatalf("Parse(%q) error %v, json.Valid %v", data, err, json.Valid(data))
		}
		if err != nil {
			return
		}
		trimmed := bytes.Trim(data, " \t\n\r")
		if v.Kind != rawKind(trimmed) {
			t.Fatalf("Parse(%q).Kind = %v", data, v.Kind)
		}
		switch v.Kind {
		case String:
			var s string
			if err := json.Unmarshal(data, &s); err != nil || s != v.Text {
				t.Fatalf("Parse(%q).Text = %q, encoding/json %q, %v", data, v.Text, s, err)
			}
		case Number, Bool:
			if v.Text != string(trimmed) {
				t.Fatalf("Parse(%q).Text = %q", data, v.Text)
			}
		case Object:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("encoding/json cannot decode %q: %v", data, err)
			}
			checkMembers(t, data, v, m)
		default:
			if v.Text != "" {
				t.Fatalf("Parse(%q).Text = %q", data, v.Text)
			}
		}
		if v.Kind != Object && v.Members() != nil {
			t.Fatalf("Parse(%q).Members = %v", data, v.Members())
		}
	})
}

func rawKind(raw []byte) Kind {
	return kindOf(raw[0])
}

// checkMembers checks v's members, found with Member (the last duplicate
// wins, as in encoding/json), against encoding/json's decoding of data.
func checkMembers(t *testing.T, data []byte, v Value, want map[string]json.RawMessage) {
	t.Helper()
	if got := v.Members(); len(got) != len(want) {
		t.Fatalf("Parse(%q): %d members, encoding/json %d", data, len(got), len(want))
	}
	for k, raw := range want {
		m, ok := v.Member(k)
		if !ok {
			t.Fatalf("Parse(%q): member %q missing", data, k)
		}
		if m.Kind != rawKind(raw) {
			t.Fatalf("Parse(%q): member %q kind %v, raw %s", data, k, m.Kind, raw)
		}
		switch m.Kind {
		case String:
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || s != m.Text {
				t.Fatalf("Parse(%q): member %q = %q, encoding/json %q, %v", data, k, m.Text, s, err)
			}
		case Number, Bool:
			if m.Text != string(raw) {
				t.Fatalf("Parse(%q): member %q = %q, raw %s", data, k, m.Text, raw)
			}
		default:
			if m.Text != "" {
				t.Fatalf("Parse(%q): member %q text %q", data, k, m.Text)
			}
		}
	}
}

// FuzzAppendString checks that AppendString's output reads back to the input
// (after U+FFFD substitution for bad bytes), holds no raw control bytes, and
// is what encoding/json writes once Go's extra escapes are undone.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"\`, "\b\f\n\r\t\x00\x1f\x7f", "<>&", "\u2028\u2029",
		"é😀\ufeff\ufffd", "a\xffb", "\xed\xa0\x80", "\xc3", "\xf4\x90\x80\x80", strings.Repeat("abcdefg\"", 5)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString([]byte("pre"), s)
		if !bytes.HasPrefix(out, []byte("pre")) {
			t.Fatalf("AppendString(%q) lost the prefix: %q", s, out)
		}
		out = out[3:]
		for _, c := range out {
			if c < 0x20 {
				t.Fatalf("AppendString(%q) = %q has a raw control byte", s, out)
			}
		}
		if !utf8.Valid(out) {
			t.Fatalf("AppendString(%q) = %q is not UTF-8", s, out)
		}
		want := string([]rune(s)) // bad bytes become U+FFFD, as utf8.DecodeRune sees them
		v, err := Parse(out)
		if err != nil || v.Kind != String || v.Text != want {
			t.Fatalf("Parse(AppendString(%q)) = %+v, %v; want %q", s, v, err, want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if goOut := undoGoEscapes(t, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); goOut != string(out) {
			t.Fatalf("AppendString(%q) = %s, encoding/json (normalized) %s", s, out, goOut)
		}
	})
}

// undoGoEscapes rewrites the escapes encoding/json writes but JSON.stringify
// does not: \u2028, \u2029 and \ufffd (for bad bytes) as the characters, and
// \u0008, \u000c as \b, \f.
func undoGoEscapes(t *testing.T, b []byte) string {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		if b[i+1] != 'u' {
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		if err != nil {
			t.Fatalf("bad escape in %q", b)
		}
		switch r {
		case 0x2028, 0x2029, 0xfffd:
			out = utf8.AppendRune(out, rune(r))
		case '\b':
			out = append(out, `\b`...)
		case '\f':
			out = append(out, `\f`...)
		default:
			out = append(out, b[i:i+6]...)
		}
		i += 5
	}
	return string(out)
}
