package jsjson

import (
	"errors"
	"testing"
)

// TestExpected checks what each syntax error says was expected, and where.
func TestExpected(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in     string
		offset int
		want   string
	}{
		{``, 0, ExpectValue},
		{`  `, 2, ExpectValue},
		{`{`, 1, ExpectKeyOrBrace},
		{`{x`, 1, ExpectKeyOrBrace},
		{`{"a"`, 4, ExpectColon},
		{`{"a" 1}`, 5, ExpectColon},
		{`{"a":`, 5, ExpectValue},
		{`{"a":}`, 5, ExpectValue},
		{`{"a":1`, 6, ExpectCommaOrBrace},
		{`{"a":1 2}`, 7, ExpectCommaOrBrace},
		{`{"a":1,`, 7, ExpectKey},
		{`{"a":1,}`, 7, ExpectKey},
		{`{"runId":"run-1","callId":"lookup","kind":,}`, 42, ExpectValue},
		{`{"runId":"run-1","callId":"lookup","kind":"completed",42}`, 54, ExpectKey},
		{`{"runId":"run-1","callId":"lookup","kind":"completed","output":"x`, 65, ExpectQuote},
		{`[`, 1, ExpectValueOrBracket},
		{`[}`, 1, ExpectValueOrBracket},
		{`[1`, 2, ExpectCommaOrBracket},
		{`[1 2]`, 3, ExpectCommaOrBracket},
		{`[1,`, 3, ExpectValue},
		{`[1,]`, 3, ExpectValue},
		{`{"a":{`, 6, ExpectKeyOrBrace},
		{`{"a":{"b"`, 9, ExpectColon},
		{`{"a":{"b" 1}}`, 10, ExpectColon},
		{`{"a":{"b":1,}}`, 12, ExpectKey},
		{`{"a":{"b":1`, 11, ExpectCommaOrBrace},
		{`{"a":{"b":1]}`, 11, ExpectCommaOrBrace},
		{`{"a":[[1]}`, 9, ExpectCommaOrBracket},
		{`{} x`, 3, ExpectEnd},
		{`01`, 1, ExpectEnd},
		{`-`, 1, ExpectDigit},
		{`-x`, 1, ExpectDigit},
		{`1.`, 2, ExpectDigit},
		{`1.e`, 2, ExpectDigit},
		{`1e`, 2, ExpectDigitOrSign},
		{`1ex`, 2, ExpectDigitOrSign},
		{`1e+`, 3, ExpectDigit},
		{`1e-x`, 3, ExpectDigit},
		{`nul`, 3, `"l" (to spell null)`},
		{`tx`, 1, `"r" (to spell true)`},
		{`fals`, 4, `"e" (to spell false)`},
		{`"abc`, 4, ExpectQuote},
		{`"\`, 2, ExpectEscape},
		{`"\q"`, 2, ExpectEscape},
		{`"\u12`, 5, ExpectHexDigit},
		{`"\u12x4"`, 5, ExpectHexDigit},
		{"\"a\nb\"", 2, ExpectNoControl},
		{`{"a":["x\q"]}`, 9, ExpectEscape},
		{"'a'", 0, ExpectValue},
	} {
		_, err := parseBoth(t, c.in)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != c.offset || se.Expected != c.want {
			t.Errorf("Parse(%q) = %#v, want offset %d expecting %s", c.in, err, c.offset, c.want)
		}
	}
}

// TestEveryErrorSaysWhatWasExpected runs every invalid golden vector.
func TestEveryErrorSaysWhatWasExpected(t *testing.T) {
	t.Parallel()
	n := 0
	for _, vec := range loadVectors(t) {
		_, err := Parse(vec.Input)
		var se *SyntaxError
		if err != nil && (!errors.As(err, &se) || se.Expected == "") {
			t.Errorf("Parse(%.80q) = %#v: no expectation", vec.Input, err)
		}
		if err != nil {
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d invalid vectors", n)
	}
}

func TestPosition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s      string
		offset int
		want   int
	}{
		{"", 0, 0},
		{"abc", 2, 2},
		{"abc", 9, 3},
		{"abc", -1, 0},
		{"é{", 2, 1},        // two bytes, one code unit
		{"😀{", 4, 2},        // four bytes, a surrogate pair
		{"\xff\xfe{", 2, 2}, // each invalid byte is one U+FFFD
		{"€x", 3, 1},
	} {
		if got := Position(c.s, c.offset); got != c.want {
			t.Errorf("Position(%q, %d) = %d, want %d", c.s, c.offset, got, c.want)
		}
	}
}
