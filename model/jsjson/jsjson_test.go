package jsjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// parseBoth parses in as a string and as a byte slice, checks that both agree
// and that a failure is a *SyntaxError, and returns the result.
func parseBoth(t *testing.T, in string) (Value, error) {
	t.Helper()
	v, err := Parse(in)
	vb, errb := Parse([]byte(in))
	if !reflect.DeepEqual(v, vb) || fmt.Sprint(err) != fmt.Sprint(errb) {
		t.Fatalf("Parse(%.80q): string gives %+v, %v; []byte gives %+v, %v", in, v, err, vb, errb)
	}
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(in) {
			t.Fatalf("Parse(%.80q): error %v is not a *SyntaxError within the input", in, err)
		}
		if !reflect.DeepEqual(v, Value{}) {
			t.Fatalf("Parse(%.80q): error with non-zero value %+v", in, v)
		}
	}
	return v, err
}

type parseCase struct {
	in      string
	ok      bool
	kind    Kind
	text    string
	members map[string]Member // checked when kind is Object
}

func good(in string, kind Kind, text string) parseCase {
	return parseCase{in: in, ok: true, kind: kind, text: text}
}

func obj(in string, members map[string]Member) parseCase {
	return parseCase{in: in, ok: true, kind: Object, members: members}
}

func bad(in string) parseCase { return parseCase{in: in} }

func mStr(s string) Member { return Member{String, s} }
func mNum(s string) Member { return Member{Number, s} }

var (
	mNull  = Member{Kind: Null}
	mTrue  = Member{Bool, "true"}
	mFalse = Member{Bool, "false"}
	mArr   = Member{Kind: Array}
	mObj   = Member{Kind: Object}
)

func runCases(t *testing.T, cases []parseCase) {
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			v, err := parseBoth(t, c.in)
			if !c.ok {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want error", c.in, v)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", c.in, err)
			}
			if v.Kind != c.kind || v.Text != c.text {
				t.Fatalf("Parse(%q) = %v %q, want %v %q", c.in, v.Kind, v.Text, c.kind, c.text)
			}
			if c.kind == Object {
				if c.members == nil {
					c.members = map[string]Member{}
				}
				if !reflect.DeepEqual(v.Members(), c.members) {
					t.Fatalf("Parse(%q).Members = %v, want %v", c.in, v.Members(), c.members)
				}
			} else if v.Members() != nil {
				t.Fatalf("Parse(%q).Members = %v, want nil", c.in, v.Members())
			}
		})
	}
}

func TestWhitespace(t *testing.T) {
	t.Parallel()
	runCases(t, []parseCase{
		good(" 1", Number, "1"), good("1 ", Number, "1"), good("\t\n\r 1\t\n\r ", Number, "1"),
		obj(" {\t\"a\"\n:\r1 , \"b\" : [ ] } ", map[string]Member{"a": mNum("1"), "b": mArr}),
		good("[ 1 ,\n2 ]", Array, ""), good("{ }", Object, ""), good("[\r\n]", Array, ""),
		bad(""), bad(" "), bad("\t\n\r "),
		bad("\ufeff1"), bad("1\ufeff"), bad("\u00a01"), bad("1\u00a0"), bad("\v1"), bad("1\v"),
		bad("\f1"), bad("1\f"), bad("\x001"), bad("1\x00"), bad("\u20281"), bad("\u3000{}"),
		bad("\x851"), bad("[1,\v2]"), bad(`{"a":1` + "\f}"), bad("\xa01"),
	})
}

func TestLiterals(t *testing.T) {
	t.Parallel()
	runCases(t, []parseCase{
		good("null", Null, ""), good("true", Bool, "true"), good("false", Bool, "false"),
		bad("True"), bad("NULL"), bad("nul"), bad("tru"), bad("f"), bad("nulll"), bad("truex"),
		bad("true false"), bad("undefined"), bad("NaN"), bad("Infinity"), bad("-Infinity"),
		bad("t rue"), bad("nan"), bad("[tru]"), bad(`{"a":fals}`),
		obj(`{"t":true,"f":false,"n":null}`, map[string]Member{"t": mTrue, "f": mFalse, "n": mNull}),
	})
}

func TestNumbers(t *testing.T) {
	t.Parallel()
	var cases []parseCase
	for _, n := range []string{"0", "-0", "1", "-1", "10", "1234567890", "0.5", "-0.5", "1.25",
		"1e5", "1E5", "1e+5", "1e-5", "1.5e10", "-1.5E-10", "0e0", "0.0", "1e400", "-1e400",
		"1e-400", "123456789012345678901234567890", "9007199254740993", "5e-324",
		"1.7976931348623157e308", "0.1e1", "1e0001"} {
		cases = append(cases, good(n, Number, n), obj(`{"n":`+n+`}`, map[string]Member{"n": mNum(n)}),
			good("["+n+"]", Array, ""))
	}
	for _, n := range []string{"01", "-01", "00", "+1", ".5", "-.5", "1.", "-", "--1", "1e", "1e+",
		"1e-", "1.e5", "1.5e", "0x10", "0b1", "1_000", "1e1.5", "1ee1", "1e++1", "- 1", "1 2",
		"1.2.3", "Infinity", "NaN", "\u0663", "\uff11", "1,", "0.", "-0.", "1-", "01.5", "-a"} {
		cases = append(cases, bad(n), bad(`{"n":`+n+`}`), bad("["+n+"]"))
	}
	runCases(t, cases)
}

func TestStrings(t *testing.T) {
	t.Parallel()
	runCases(t, []parseCase{
		good(`""`, String, ""), good(`"x"`, String, "x"), good(`"run-1"`, String, "run-1"),
		good(`"\"\\\/\b\f\n\r\t"`, String, "\"\\/\b\f\n\r\t"),
		good(`"\u0041\u00e9\u00E9\u20ac\uFFFF"`, String, "Aéé€\uffff"),
		good(`"\u0000"`, String, "\x00"), good(`"a\u0000b"`, String, "a\x00b"),
		good("\"\x7f\"", String, "\x7f"), good("\"\u2028\u2029\"", String, "\u2028\u2029"),
		good(`"é😀"`, String, "é😀"), good("\"\ufeff\"", String, "\ufeff"),
		good(`"<>&'"`, String, `<>&'`), good(`"/"`, String, "/"),
		// Surrogates: a pair makes one character; anything lone becomes U+FFFD.
		good(`"\uD83D\uDE00"`, String, "😀"), good(`"\ud83d\ude00"`, String, "😀"),
		good(`"\udbff\udfff"`, String, "\U0010ffff"), good(`"\ud800\udc00"`, String, "\U00010000"),
		good(`"\ud83d"`, String, "\ufffd"), good(`"\ude00"`, String, "\ufffd"),
		good(`"\ud83dx"`, String, "\ufffdx"), good(`"\ud83d\u0041"`, String, "\ufffdA"),
		good(`"\ud83d\ud83d\ude00"`, String, "\ufffd😀"), good(`"\ude00\ud83d"`, String, "\ufffd\ufffd"),
		good(`"\ud83d\ude00\ude00"`, String, "😀\ufffd"), good(`"\udc00\udc00"`, String, "\ufffd\ufffd"),
		good(`"\udfff\udbff\udfff"`, String, "\ufffd\U0010ffff"), good(`"\ud7ff\udc00"`, String, "\ud7ff\ufffd"),
		good(`"\ue000\udc00"`, String, "\ue000\ufffd"), good(`"\udbff\ue000"`, String, "\ufffd\ue000"), good(`"\ud83d\n"`, String, "\ufffd\n"),
		good(`"\ud83d\\"`, String, "\ufffd\\"), good("\"\\ud83d\U0001F600\"", String, "\ufffd😀"),
		// Invalid UTF-8 is not an error: each bad byte becomes U+FFFD.
		good("\"\xff\"", String, "\ufffd"), good("\"a\xc3\"", String, "a\ufffd"),
		good("\"\xed\xa0\x80\"", String, "\ufffd\ufffd\ufffd"), good("\"\xc3\xa9\xff\\n\"", String, "é\ufffd\n"),
		good("\"\xc0\xaf\"", String, "\ufffd\ufffd"),
		// Errors: controls, bad escapes, bad hex, unterminated.
		bad("\"\x00\""), bad("\"\x01\""), bad("\"\x1f\""), bad("\"\t\""), bad("\"\n\""), bad("\"\r\""),
		bad(`"\x41"`), bad(`"\a"`), bad(`"\U0041"`), bad(`"\0"`), bad(`"\'"`), bad(`"\ "`), bad("\"\\\n\""),
		bad(`"\v"`), bad(`"\u"`), bad(`"\u00"`), bad(`"\u00e"`), bad(`"\u00eg"`), bad(`"\uGGGG"`),
		bad(`"\u12"`), bad(`"\`), bad(`"\"`), bad(`"abc`), bad(`"abc\"`), bad(`abc"`), bad(`"`),
		bad(`'a'`), bad(`"a""b"`), bad(`"\u+123"`), bad(`"\u-123"`), bad(`"\u 123"`),
	})
}

func TestObjectsAndArrays(t *testing.T) {
	t.Parallel()
	reply := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"x"}`
	runCases(t, []parseCase{
		obj(reply, map[string]Member{"runId": mStr("run-1"), "callId": mStr("lookup"),
			"kind": mStr("completed"), "output": mStr("x")}),
		obj(`{}`, nil), obj(`{"":""}`, map[string]Member{"": mStr("")}),
		obj(`{"a":[1,{"b":[{}]}],"c":{"d":"e"},"f":-2.5e3,"g":null,"h":"i"}`, map[string]Member{
			"a": mArr, "c": mObj, "f": mNum("-2.5e3"), "g": mNull, "h": mStr("i")}),
		// Keys are decoded like strings and are case-sensitive.
		obj(`{"run\u0049d":"x"}`, map[string]Member{"runId": mStr("x")}),
		obj(`{"\u0072unId":"y","runid":"z","RunId":"w"}`, map[string]Member{
			"runId": mStr("y"), "runid": mStr("z"), "RunId": mStr("w")}),
		obj(`{"k\"q":"v","k\\":"w","\/":"/","\u0000":"0"}`, map[string]Member{
			"k\"q": mStr("v"), "k\\": mStr("w"), "/": mStr("/"), "\x00": mStr("0")}),
		obj(`{"\ud83d\ude00":"pair"}`, map[string]Member{"😀": mStr("pair")}),
		obj(`{"\ud83d":"lone"}`, map[string]Member{"\ufffd": mStr("lone")}),
		obj("{\"\xff\":\"\xfe\"}", map[string]Member{"\ufffd": mStr("\ufffd")}),
		// __proto__ is an ordinary key.
		obj(`{"__proto__":{"x":1},"constructor":"c"}`, map[string]Member{"__proto__": mObj, "constructor": mStr("c")}),
		obj(`{"__proto__":"p"}`, map[string]Member{"__proto__": mStr("p")}),
		// Nested strings are validated but not kept.
		obj(`{"a":{"b":"\u0041\n"},"c":["\ud83d"]}`, map[string]Member{"a": mObj, "c": mArr}),
		bad(`{"a":{"b":"\x"}}`), bad(`{"a":["` + "\x01" + `"]}`), bad(`[{"a":"\u12"}]`),
		good(`[1,"a",true,null,{},[]]`, Array, ""), good(`[[[]],[{}]]`, Array, ""),
		good(`[{"a":[{"b":{}}]}]`, Array, ""), good("[\"\xff\"]", Array, ""),
		bad(`{`), bad(`}`), bad(`[`), bad(`]`), bad(`[}`), bad(`{]`), bad(`[[]`), bad(`[]]`),
		bad(`{"a":1,}`), bad(`[1,]`), bad(`[,1]`), bad(`[1,,2]`), bad(`{,}`), bad(`{"a"}`),
		bad(`{"a":}`), bad(`{"a" 1}`), bad(`{"a"::1}`), bad(`{"a":1 "b":2}`), bad(`{"a":1,,"b":2}`),
		bad(`{a:1}`), bad(`{'a':1}`), bad(`{1:1}`), bad(`{null:1}`), bad(`{"a":1}}`),
		bad(`{"a":[}`), bad(`{"a":{]}`), bad(`[{]}`), bad(`{"a":{"b" 1}}`), bad(`{"a":{"b":1,}}`),
		bad(`{"a":{,}}`), bad(`{"a":{1:2}}`), bad(`[1 2]`), bad(`{"a":[1 2]}`), bad(`{"a":{"b":1 "c":2}}`),
		bad(reply[:len(reply)-1]), bad(reply[:10]), bad(`{"a":1`), bad(`{"a":`), bad(`{"a"`),
		bad(`{"a":{"b":`), bad(`{"a":[`), bad(`[{"a":1},`), bad(`{"a":1,`),
	})
}

func TestDuplicates(t *testing.T) {
	t.Parallel()
	runCases(t, []parseCase{
		obj(`{"a":1,"a":2}`, map[string]Member{"a": mNum("2")}),
		obj(`{"a":"x","a":"y"}`, map[string]Member{"a": mStr("y")}),
		obj(`{"a":"x","a":1}`, map[string]Member{"a": mNum("1")}),
		obj(`{"a":1,"a":"x"}`, map[string]Member{"a": mStr("x")}),
		obj(`{"a":"x","a":null}`, map[string]Member{"a": mNull}),
		obj(`{"a":"x","a":{}}`, map[string]Member{"a": mObj}),
		obj(`{"a":{},"a":"x"}`, map[string]Member{"a": mStr("x")}),
		obj(`{"a":[],"a":true}`, map[string]Member{"a": mTrue}),
		obj(`{"a":"x","b":"y","a":"z"}`, map[string]Member{"a": mStr("z"), "b": mStr("y")}),
		obj(`{"a":"x","\u0061":"y"}`, map[string]Member{"a": mStr("y")}),
		obj(`{"runId":"r1","runId":"r2"}`, map[string]Member{"runId": mStr("r2")}),
		obj(`{"\ud83d\ude00":"pair","😀":"raw"}`, map[string]Member{"😀": mStr("raw")}),
		// The documented difference: distinct lone surrogates are one key here.
		obj(`{"\ud800":1,"\udbff":2}`, map[string]Member{"\ufffd": mNum("2")}),
		// Nested duplicates are irrelevant; a nested error still fails.
		obj(`{"a":{"a":1,"a":2},"a":{"b":1}}`, map[string]Member{"a": mObj}),
		bad(`{"a":1,"a":}`),
	})
}

func TestTopLevelAndTrailing(t *testing.T) {
	t.Parallel()
	runCases(t, []parseCase{
		good(`"just a string"`, String, "just a string"), good("42", Number, "42"),
		good(`[null]`, Array, ""), good(" null ", Null, ""),
		bad("1 2"), bad(`"a" "b"`), bad(`{} {}`), bad(`[] []`), bad(`{}x`), bad(`{},`), bad(`[]]`),
		bad(`{}/**/`), bad(`//x` + "\n{}"), bad("{}\x00"), bad(`"a"x`), bad(`nullnull`), bad(`0 0`),
		bad("{}\xff"), bad("\xff{}"),
	})
}

func TestSyntaxErrorMessages(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, msg string }{
		{"", "jsjson: unexpected end of input"},
		{`{"a":1`, "jsjson: unexpected end of input"},
		{"[[[", "jsjson: unexpected end of input"},
		{`{"runId":"run-1",x}`, "jsjson: invalid character 'x' looking for beginning of object key string at offset 17"},
		{"01", "jsjson: invalid character '1' after top-level value at offset 1"},
		{`{"a" 1}`, "jsjson: invalid character '1' after object key at offset 5"},
		{`[1 2]`, "jsjson: invalid character '2' after array element at offset 3"},
		{`{"a":{"b":1 2}}`, "jsjson: invalid character '2' after object key:value pair at offset 12"},
		{`"\q"`, "jsjson: invalid character 'q' in string escape code at offset 2"},
		{`"\u12x4"`, `jsjson: invalid character 'x' in \u hexadecimal character escape at offset 5`},
		{"\"a\nb\"", `jsjson: invalid character '\n' in string literal at offset 2`},
		{"\ufeff{}", `jsjson: invalid character '\ufeff' looking for beginning of value at offset 0`},
		{"\xff", `jsjson: invalid character '\xff' looking for beginning of value at offset 0`},
		{"nulL", "jsjson: invalid character 'L' in literal null (expecting 'l') at offset 3"},
		{"-x", "jsjson: invalid character 'x' in numeric literal at offset 1"},
		{"1.x", "jsjson: invalid character 'x' after decimal point in numeric literal at offset 2"},
		{"1e+x", "jsjson: invalid character 'x' in exponent of numeric literal at offset 3"},
		{`'a'`, `jsjson: invalid character '\'' looking for beginning of value at offset 0`},
	} {
		_, err := parseBoth(t, c.in)
		if err == nil || err.Error() != c.msg {
			t.Errorf("Parse(%q) error = %v, want %s", c.in, err, c.msg)
		}
	}
	var se *SyntaxError
	if _, err := Parse("[1,]"); !errors.As(err, &se) || se.Offset != 3 || se.Msg != "invalid character ']' looking for beginning of value" {
		t.Errorf("Parse(\"[1,]\") = %#v", err)
	}
	if _, err := Parse(`{"a"`); !errors.As(err, &se) || se.Offset != 4 || se.Msg != "unexpected end of input" {
		t.Errorf("Parse(`{\"a\"`) = %#v", err)
	}
}

func TestDeepNesting(t *testing.T) {
	t.Parallel()
	const d = 1_000_000
	for _, c := range []struct {
		name string
		in   string
		kind Kind // 0: want an error
	}{
		{"arrays closed", strings.Repeat("[", d) + strings.Repeat("]", d), Array},
		{"arrays unclosed", strings.Repeat("[", d), 0},
		{"arrays one short", strings.Repeat("[", d) + strings.Repeat("]", d-1), 0},
		{"arrays one extra", strings.Repeat("[", d) + strings.Repeat("]", d+1), 0},
		{"arrays wrong closer", strings.Repeat("[", d) + "}" + strings.Repeat("]", d-1), 0},
		{"objects closed", strings.Repeat(`{"a":`, d) + "1" + strings.Repeat("}", d), Object},
		{"objects unclosed", strings.Repeat(`{"a":`, d) + "1", 0},
		{"mixed closed", strings.Repeat(`[{"a":`, d/2) + `""` + strings.Repeat("}]", d/2), Array},
		{"mixed swapped closers", strings.Repeat(`[{"a":`, d/2) + `""` + strings.Repeat("]}", d/2), 0},
		{"member", `{"k":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `,"s":"x"}`, Object},
		{"member unclosed", `{"k":` + strings.Repeat("[", d) + `,"s":"x"}`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := parseBoth(t, c.in)
			if c.kind == 0 {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil || v.Kind != c.kind {
				t.Fatalf("got %v, %v; want %v", v.Kind, err, c.kind)
			}
			if c.name == "member" && !reflect.DeepEqual(v.Members(), map[string]Member{"k": mArr, "s": mStr("x")}) {
				t.Fatalf("members %v", v.Members())
			}
		})
	}
}

// TestRandomNesting checks the bit stack past its first word against
// encoding/json on random mixtures of objects and arrays, well formed or
// with one closer swapped.
func TestRandomNesting(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		depth := 1 + r.IntN(500)
		var b strings.Builder
		closers := make([]byte, 0, depth)
		for range depth {
			if r.IntN(2) == 0 {
				b.WriteString(`{"k":`)
				closers = append(closers, '}')
			} else {
				b.WriteString(`[0,`)
				closers = append(closers, ']')
			}
		}
		b.WriteString(`"x"`)
		if n%2 == 1 {
			i := r.IntN(depth)
			closers[i] ^= '}' ^ ']'
		}
		for i := len(closers) - 1; i >= 0; i-- {
			b.WriteByte(closers[i])
		}
		in := b.String()
		_, err := parseBoth(t, in)
		if (err == nil) != json.Valid([]byte(in)) {
			t.Fatalf("depth %d: Parse error %v, json.Valid %v", depth, err, json.Valid([]byte(in)))
		}
	}
}

func TestValueString(t *testing.T) {
	t.Parallel()
	v, err := Parse(`{"s":"x","e":"","n":1,"b":true,"z":null,"o":{},"a":["s"]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, want string
		ok        bool
	}{{"s", "x", true}, {"e", "", true}, {"n", "", false}, {"b", "", false}, {"z", "", false},
		{"o", "", false}, {"a", "", false}, {"missing", "", false}, {"S", "", false}} {
		if got, ok := v.String(c.key); got != c.want || ok != c.ok {
			t.Errorf("String(%q) = %q, %v; want %q, %v", c.key, got, ok, c.want, c.ok)
		}
	}
	if got, ok := (Value{Kind: String, Text: "top"}).String("x"); got != "" || ok {
		t.Errorf("String on a non-object = %q, %v", got, ok)
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	want := map[Kind]string{Null: "null", Bool: "boolean", Number: "number", String: "string",
		Array: "array", Object: "object", 0: "jsjson.Kind(0)", 7: "jsjson.Kind(7)"}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), s)
		}
	}
}

// TestNoAliasing checks that a Value parsed from bytes survives reuse of them,
// and that one parsed from a string is still right.
func TestNoAliasing(t *testing.T) {
	t.Parallel()
	in := `{"runId":"run-1","n":12,"esc":"a\nb","k\u0041":"v"}` + " "
	b := []byte(in)
	v, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'X'
	}
	want := map[string]Member{"runId": mStr("run-1"), "n": mNum("12"), "esc": mStr("a\nb"), "kA": mStr("v")}
	if !reflect.DeepEqual(v.Members(), want) {
		t.Fatalf("after reuse: %v", v.Members())
	}
	for _, in := range []string{`"top"`, `-1.5`} {
		b := []byte(in)
		v, _ := Parse(b)
		b[1] = 'X'
		if v.Text != strings.Trim(in, `"`) {
			t.Fatalf("top-level %s after reuse: %q", in, v.Text)
		}
	}
}

// TestAllocations is not parallel: AllocsPerRun counts every goroutine's
// allocations, so it runs before the parallel tests resume.
func TestAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	reply := `{"runId":"run-1","callId":"lookup","kind":"completed","output":"The answer is 42.","seq":3,"done":true}`
	replyBytes := []byte(reply)
	nested := `[{"a":[1,2,{"b":"c"}]},"x",` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `]`
	// A one-member object from a string costs just its map, whatever the
	// runtime needs for that (two allocations with Go 1.26's maps).
	maxMap := testing.AllocsPerRun(100, func() { Parse(`{"a":1}`) })
	if maxMap > 2 {
		t.Errorf("a small map costs %v allocations", maxMap)
	}
	for _, c := range []struct {
		name  string
		f     func()
		extra float64 // allocations beyond the map's
	}{
		{"string reply", func() { Parse(reply) }, 0},
		{"byte reply", func() { Parse(replyBytes) }, 1}, // one arena for all kept text
		{"string escaped", func() { Parse(`{"a":"x\ny","b":"\u0041"}`) }, 1},
		{"nested", func() { Parse(nested) }, 1 - maxMap}, // the bit stack past 64 levels
		{"top string", func() { Parse(`"plain"`) }, -maxMap},
	} {
		got := testing.AllocsPerRun(100, c.f)
		if want := maxMap + c.extra; got > want {
			t.Errorf("%s: %v allocations, want at most %v", c.name, got, want)
		}
	}
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`"`, `"\""`},
		{`\`, `"\\"`},
		{"/", `"/"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1a\x1f", `"\u0000\u0001\u001a\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"<script>&amp;</script>", `"<script>&amp;</script>"`},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"é€😀\ufeff\ufffd", "\"é€😀\ufeff\ufffd\""},
		{"a\xffb", "\"a\ufffdb\""},
		{"\xed\xa0\x80", "\"\ufffd\ufffd\ufffd\""},
		{"\xc3", "\"\ufffd\""},
		{"Answer for run-1", `"Answer for run-1"`},
		{`{"runId":"run-1"}`, `"{\"runId\":\"run-1\"}"`},
		{strings.Repeat("x", 40) + "\n" + strings.Repeat("y", 40), `"` + strings.Repeat("x", 40) + `\n` + strings.Repeat("y", 40) + `"`},
	} {
		if got := string(AppendString(nil, c.in)); got != c.want {
			t.Errorf("AppendString(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := string(AppendString([]byte("pre:"), c.in)); got != "pre:"+c.want {
			t.Errorf("AppendString(pre:, %q) = %s", c.in, got)
		}
	}
}

// TestInputTypes checks named string and byte-slice types, nil input, and
// that a named byte slice is copied from like []byte.
func TestInputTypes(t *testing.T) {
	t.Parallel()
	type text string
	in := `{"runId":"run-1","n":5}`
	want := map[string]Member{"runId": mStr("run-1"), "n": mNum("5")}
	raw := json.RawMessage(in)
	for name, f := range map[string]func() (Value, error){
		"named string": func() (Value, error) { return Parse(text(in)) },
		"RawMessage":   func() (Value, error) { return Parse(raw) },
	} {
		v, err := f()
		if err != nil || !reflect.DeepEqual(v.Members(), want) {
			t.Errorf("%s: %v, %v", name, v.Members(), err)
		}
	}
	v, _ := Parse(raw)
	copy(raw, strings.Repeat("X", len(raw)))
	if !reflect.DeepEqual(v.Members(), want) {
		t.Errorf("RawMessage reuse changed the value: %v", v.Members())
	}
	if _, err := Parse([]byte(nil)); err == nil || err.Error() != "jsjson: unexpected end of input" {
		t.Errorf("Parse(nil) error = %v", err)
	}
}

// TestManyMembers checks objects past the inline member list, with
// duplicates, escapes and bad bytes, against encoding/json.
func TestManyMembers(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{7, 8, 9, 16, 17, 100, 1000} {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			key := fmt.Sprintf(`"k%d"`, r.IntN(n))
			if i%5 == 0 {
				key = fmt.Sprintf(`"k\u00%02x\n%d"`, 0x41+r.IntN(26), r.IntN(10))
			}
			switch r.IntN(5) {
			case 0:
				fmt.Fprintf(&b, `%s:%d`, key, r.IntN(1000))
			case 1:
				fmt.Fprintf(&b, `%s:"v%d\"\ud83d\ude00"`, key, i)
			case 2:
				fmt.Fprintf(&b, "%s:\"bad\xff%d\"", key, i)
			case 3:
				fmt.Fprintf(&b, `%s:[{"x":"%d"}]`, key, i)
			default:
				fmt.Fprintf(&b, `%s:"plain %d"`, key, i)
			}
		}
		b.WriteByte('}')
		in := b.String()
		v, err := parseBoth(t, in)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		checkMembers(t, []byte(in), v, m)
	}
}
