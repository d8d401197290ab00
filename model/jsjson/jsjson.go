// Package jsjson parses JSON text exactly as JavaScript's JSON.parse does
// (ECMA-262 JSON.parse over the RFC 8259 grammar): it accepts and rejects the
// same inputs, lets the last of duplicate keys win, treats "__proto__" as an
// ordinary key and has no nesting limit, because it never recurses. It also
// writes string literals exactly as JSON.stringify does.
//
// Only the top level of a value is kept: the members of a top-level object are
// decoded and found with Value.Member, while nested values are validated and
// skipped without allocating.
//
// The one difference from JavaScript comes from Go strings being UTF-8: a lone
// surrogate escape (\uD800 not followed by a low-surrogate escape, or a lone
// \uDC00) decodes to U+FFFD instead of an unpaired UTF-16 code unit, so keys
// that differ only in lone surrogates are the same key here. Invalid UTF-8
// bytes, which a JavaScript string cannot hold, likewise decode to U+FFFD (one
// per byte, as utf8.DecodeRune reports them); they are not an error.
package jsjson

import (
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Kind is what JavaScript's typeof / Array.isArray would say of a parsed value.
type Kind uint8

const (
	Null Kind = iota + 1
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "jsjson.Kind(" + strconv.Itoa(int(k)) + ")"
}

// Member is one member of the top-level object.
type Member struct {
	Kind Kind
	Text string // String: the decoded string; Number: the literal as written; Bool: "true"/"false"; else ""
}

// Value is a parsed JSON text. Only the top level is kept: nested values are
// validated and skipped.
//
// When Parse was given a string, Text and members may share memory with it;
// when it was given a byte slice they never do, so the slice may be reused.
type Value struct {
	Kind Kind
	Text string // as Member.Text, for a top-level scalar
	// members of a top-level Object, in source order, duplicates kept: a
	// slice, not a map, because frames and replies have a handful of keys
	// and a map cost more than the rest of parsing them.
	members []keyed
}

type keyed struct {
	key string
	Member
}

// Member returns the top-level object's member key. Of duplicate keys the
// last wins, as in JSON.parse.
func (v Value) Member(key string) (Member, bool) {
	for i := len(v.members) - 1; i >= 0; i-- {
		if v.members[i].key == key {
			return v.members[i].Member, true
		}
	}
	return Member{}, false
}

// Members returns the top-level object's members as JSON.parse would keep
// them (the last of duplicate keys wins), or nil when v is not an object.
func (v Value) Members() map[string]Member {
	if v.Kind != Object {
		return nil
	}
	m := make(map[string]Member, len(v.members))
	for _, e := range v.members {
		m[e.key] = e.Member
	}
	return m
}

// String returns the member's string value when key is present with a string value.
func (v Value) String(key string) (string, bool) {
	m, ok := v.Member(key)
	if !ok || m.Kind != String {
		return "", false
	}
	return m.Text, true
}

// SyntaxError is the error Parse returns wherever JSON.parse throws a SyntaxError.
type SyntaxError struct {
	Offset int    // byte offset of the offending byte, or the input length at end of input
	Msg    string // what went wrong, without the "jsjson: " prefix or the offset
	// Expected says what the grammar allowed at Offset, in words a student
	// reads ("a string", `":"`, `"," or "}"`); Error does not use it, so
	// error texts are as they always were.
	Expected string
}

// What Parse can have expected where it stopped (SyntaxError.Expected).
const (
	ExpectValue          = "a value"
	ExpectValueOrBracket = `a value or "]"`
	ExpectKey            = "a string"
	ExpectKeyOrBrace     = `a string or "}"`
	ExpectColon          = `":"`
	ExpectCommaOrBrace   = `"," or "}"`
	ExpectCommaOrBracket = `"," or "]"`
	ExpectEnd            = "the end of the text"
	ExpectDigit          = "a digit"
	ExpectDigitOrSign    = `a digit, "+" or "-"`
	ExpectHexDigit       = "a hexadecimal digit"
	ExpectEscape         = `an escape: \" \\ \/ \b \f \n \r \t or \u`
	ExpectQuote          = `the closing quote (")`
	ExpectNoControl      = `an escape such as \n in place of a control character`
)

// Position is offset (a byte offset into s, as in SyntaxError) counted as
// JavaScript counts a string's positions: in UTF-16 code units, so that it
// matches what a browser's text field or JSON.parse's message would say. An
// invalid UTF-8 byte counts as one, as the U+FFFD it decodes to.
func Position(s string, offset int) int {
	offset = min(max(offset, 0), len(s))
	n := 0
	for _, r := range s[:offset] {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

const msgEOF = "unexpected end of input"

func (e *SyntaxError) Error() string {
	if e.Msg == msgEOF {
		return "jsjson: " + e.Msg // the offset is just the input length
	}
	return "jsjson: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Parse parses data as JSON.parse would. It returns an error exactly when
// JSON.parse throws a SyntaxError.
func Parse[T ~string | ~[]byte](data T) (Value, error) {
	var p parser
	if unsafe.Sizeof(data) == unsafe.Sizeof("") {
		p.s = string(data) // T is a string type: a free conversion
	} else {
		// View the bytes as a string to share one parser; every string kept in
		// the Value is then copied out, so the caller may reuse the slice.
		b := []byte(data)
		p.s = unsafe.String(unsafe.SliceData(b), len(b))
		p.clone = true
	}
	return p.parse()
}

type parser struct {
	s     string // the whole input
	clone bool   // s aliases caller memory: kept strings must be copied
}

func (p *parser) eof(expected string) error {
	return &SyntaxError{Offset: len(p.s), Msg: msgEOF, Expected: expected}
}

func (p *parser) badChar(i int, context, expected string) error {
	return &SyntaxError{Offset: i, Msg: "invalid character " + quoteChar(p.s[i:]) + " " + context, Expected: expected}
}

// quoteChar quotes the character starting s, or the lone byte if it is not UTF-8.
func quoteChar(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 {
		return `'\x` + string(hexDigits[s[0]>>4]) + string(hexDigits[s[0]&15]) + `'`
	}
	return strconv.QuoteRune(r)
}

const hexDigits = "0123456789abcdef"

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// skipWS returns the offset of the first non-whitespace byte at or after i.
// JSON.parse's whitespace is only these four; not BOM, U+00A0, \v or \f.
func skipWS(s string, i int) int {
	for i < len(s) && isWS(s[i]) {
		i++
	}
	return i
}

func (p *parser) parse() (Value, error) {
	s := p.s
	i := skipWS(s, 0)
	if i == len(s) {
		return Value{}, p.eof(ExpectValue)
	}
	var v Value
	var end int
	var err error
	switch s[i] {
	case '{':
		v.Kind = Object
		v.members, end, err = p.object(i)
	case '"':
		var grow int
		v.Kind = String
		end, grow, err = p.scanString(i, true)
		if err == nil {
			v.Text = p.single(str{i + 1, end - 1, grow})
		}
	default:
		v.Kind, end, err = p.skipValue(i, ExpectValue)
		switch {
		case err != nil:
		case v.Kind == Number:
			v.Text = p.single(str{i, end, -1})
		case v.Kind == Bool:
			v.Text = boolText(s[i])
		}
	}
	if err != nil {
		return Value{}, err
	}
	if end = skipWS(s, end); end < len(s) {
		return Value{}, p.badChar(end, "after top-level value", ExpectEnd)
	}
	return v, nil
}

func boolText(first byte) string {
	if first == 't' {
		return "true"
	}
	return "false"
}

// str locates text to keep: s[start:end] is a string literal's contents
// (without quotes) or a number literal.
type str struct {
	start, end int
	grow       int // -1: usable as is; else decoding needs at most end-start+grow bytes
}

// entry is a top-level member found by the validating pass.
type entry struct {
	key, val str
	kind     Kind
}

// object parses the top-level object at s[i] == '{'. It validates the whole
// object first and only then builds the map, so that all kept text can share
// one exactly sized allocation.
func (p *parser) object(i int) ([]keyed, int, error) {
	s := p.s
	var fixed [8]entry // typical replies and frames need no further allocation
	list := fixed[:0]
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == '}' {
		return []keyed{}, i + 1, nil
	}
	want := ExpectKeyOrBrace // after "{"; after a comma only a key will do
	for {
		if i >= len(s) {
			return nil, 0, p.eof(want)
		}
		if s[i] != '"' {
			return nil, 0, p.badChar(i, "looking for beginning of object key string", want)
		}
		end, grow, err := p.scanString(i, true)
		if err != nil {
			return nil, 0, err
		}
		e := entry{key: str{i + 1, end - 1, grow}}
		if i = skipWS(s, end); i >= len(s) {
			return nil, 0, p.eof(ExpectColon)
		}
		if s[i] != ':' {
			return nil, 0, p.badChar(i, "after object key", ExpectColon)
		}
		if i = skipWS(s, i+1); i >= len(s) {
			return nil, 0, p.eof(ExpectValue)
		}
		if s[i] == '"' {
			end, grow, err = p.scanString(i, true)
			e.kind, e.val = String, str{i + 1, end - 1, grow}
		} else {
			e.kind, end, err = p.skipValue(i, ExpectValue)
			e.val = str{i, end, -1}
		}
		if err != nil {
			return nil, 0, err
		}
		list = append(list, e)
		if i = skipWS(s, end); i >= len(s) {
			return nil, 0, p.eof(ExpectCommaOrBrace)
		}
		switch s[i] {
		case ',':
			i, want = skipWS(s, i+1), ExpectKey
		case '}':
			return p.members(list), i + 1, nil
		default:
			return nil, 0, p.badChar(i, "after object key:value pair", ExpectCommaOrBrace)
		}
	}
}

func (p *parser) members(list []entry) []keyed {
	n := 0
	for _, e := range list {
		n += p.need(e.key)
		if e.kind == String || e.kind == Number {
			n += p.need(e.val)
		}
	}
	var a arena
	if n > 0 {
		a.buf = make([]byte, 0, n)
	}
	m := make([]keyed, len(list))
	for i, e := range list {
		var text string
		switch e.kind {
		case String, Number:
			text = p.text(&a, e.val)
		case Bool:
			text = boolText(p.s[e.val.start])
		}
		m[i] = keyed{p.text(&a, e.key), Member{Kind: e.kind, Text: text}}
	}
	return m
}

// need is how many arena bytes text(x) may use.
func (p *parser) need(x str) int {
	if x.grow < 0 && !p.clone {
		return 0
	}
	return x.end - x.start + max(x.grow, 0)
}

// text returns the kept text for x: a substring of the input when possible,
// else a copy or decoding in the arena.
func (p *parser) text(a *arena, x str) string {
	raw := p.s[x.start:x.end]
	if x.grow < 0 {
		if !p.clone {
			return raw
		}
		return a.keep(append(a.buf, raw...))
	}
	return a.keep(appendDecoded(a.buf, raw, x.grow == 0))
}

// single returns the kept text for a top-level scalar.
func (p *parser) single(x str) string {
	var a arena
	if n := p.need(x); n > 0 {
		a.buf = make([]byte, 0, n)
	}
	return p.text(&a, x)
}

// arena holds kept text. It only ever grows by appending, so the bytes behind
// a string it returned are never written again, which makes sharing them safe.
type arena struct{ buf []byte }

// keep makes grown (a.buf with text appended) the arena and returns the appended text.
func (a *arena) keep(grown []byte) string {
	b := grown[len(a.buf):]
	a.buf = grown
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// skipValue validates the value starting at s[i] (not whitespace) and returns
// its kind and the offset just past it; want is what a syntax error there
// says was expected. Containers are tracked on an explicit stack rather than
// by recursion, so any depth that fits in memory parses.
func (p *parser) skipValue(i int, want string) (Kind, int, error) {
	s := p.s
	var stack bitstack
	var kind Kind
	var err error
	for {
		// A value (want) is expected at i.
		if i = skipWS(s, i); i >= len(s) {
			return 0, 0, p.eof(want)
		}
		c := s[i]
		if kind == 0 {
			kind = kindOf(c)
		}
		switch c {
		case '{', '[':
			j := skipWS(s, i+1)
			if j < len(s) && s[j] == c+2 { // '{'+2 == '}', '['+2 == ']'
				i = j + 1
				break
			}
			stack.push(c == '{')
			want = ExpectValue
			if c == '[' {
				i, want = j, ExpectValueOrBracket
			} else if i, err = p.skipKey(j, ExpectKeyOrBrace); err != nil {
				return 0, 0, err
			}
			continue
		case '"':
			i, _, err = p.scanString(i, false)
		case 't':
			i, err = p.literal(i, "true")
		case 'f':
			i, err = p.literal(i, "false")
		case 'n':
			i, err = p.literal(i, "null")
		default:
			if c != '-' && (c < '0' || c > '9') {
				return 0, 0, p.badChar(i, "looking for beginning of value", want)
			}
			i, err = p.number(i)
		}
		if err != nil {
			return 0, 0, err
		}
		// A value ended at i: close what containers we can.
		for {
			if stack.n == 0 {
				return kind, i, nil
			}
			obj := stack.top()
			next := ExpectCommaOrBracket
			if obj {
				next = ExpectCommaOrBrace
			}
			if i = skipWS(s, i); i >= len(s) {
				return 0, 0, p.eof(next)
			}
			if c = s[i]; c == ',' {
				i++
				if obj {
					if i, err = p.skipKey(skipWS(s, i), ExpectKey); err != nil {
						return 0, 0, err
					}
				}
				want = ExpectValue
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				stack.pop()
				i++
				continue
			}
			if obj {
				return 0, 0, p.badChar(i, "after object key:value pair", next)
			}
			return 0, 0, p.badChar(i, "after array element", next)
		}
	}
}

func kindOf(c byte) Kind {
	switch c {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	}
	return Number
}

// skipKey validates `"key" :` of a nested object starting at s[i] and returns
// the offset after the colon; want is what was expected at s[i].
func (p *parser) skipKey(i int, want string) (int, error) {
	s := p.s
	if i >= len(s) {
		return 0, p.eof(want)
	}
	if s[i] != '"' {
		return 0, p.badChar(i, "looking for beginning of object key string", want)
	}
	i, _, err := p.scanString(i, false)
	if err != nil {
		return 0, err
	}
	if i = skipWS(s, i); i >= len(s) {
		return 0, p.eof(ExpectColon)
	}
	if s[i] != ':' {
		return 0, p.badChar(i, "after object key", ExpectColon)
	}
	return i + 1, nil
}

// bitstack records, per open container, whether it is an object.
type bitstack struct {
	n  int
	lo uint64   // the first 64 levels, so ordinary nesting never allocates
	hi []uint64 // deeper levels
}

func (b *bitstack) push(obj bool) {
	var bit uint64
	if obj {
		bit = 1
	}
	if k := b.n; k < 64 {
		b.lo = b.lo&^(1<<k) | bit<<k
	} else {
		k -= 64
		if k>>6 == len(b.hi) {
			b.hi = append(b.hi, 0)
		}
		w := &b.hi[k>>6]
		*w = *w&^(1<<(k&63)) | bit<<(k&63)
	}
	b.n++
}

func (b *bitstack) pop() { b.n-- }

func (b *bitstack) top() bool {
	k := b.n - 1
	if k < 64 {
		return b.lo>>k&1 != 0
	}
	k -= 64
	return b.hi[k>>6]>>(k&63)&1 != 0
}

// literal checks for lit (true, false or null) at s[i].
func (p *parser) literal(i int, lit string) (int, error) {
	if strings.HasPrefix(p.s[i:], lit) {
		return i + len(lit), nil
	}
	for j := 1; j < len(lit); j++ {
		want := `"` + lit[j:j+1] + `" (to spell ` + lit + ")"
		if i+j >= len(p.s) {
			return 0, p.eof(want)
		}
		if p.s[i+j] != lit[j] {
			return 0, p.badChar(i+j, "in literal "+lit+" (expecting "+strconv.QuoteRune(rune(lit[j]))+")", want)
		}
	}
	panic("unreachable")
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at s[i]. Any
// magnitude is valid: JSON.parse turns out-of-range values into ±Infinity or 0.
func (p *parser) number(i int) (int, error) {
	s := p.s
	if s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return 0, p.eof(ExpectDigit)
	}
	switch c := s[i]; {
	case c == '0':
		i++ // a leading zero stands alone; a following digit is trailing data
	case '1' <= c && c <= '9':
		i = digits(s, i+1)
	default:
		return 0, p.badChar(i, "in numeric literal", ExpectDigit)
	}
	if i < len(s) && s[i] == '.' {
		if i++; i >= len(s) {
			return 0, p.eof(ExpectDigit)
		}
		if !isDigit(s[i]) {
			return 0, p.badChar(i, "after decimal point in numeric literal", ExpectDigit)
		}
		i = digits(s, i+1)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		want := ExpectDigitOrSign
		if i++; i < len(s) && (s[i] == '+' || s[i] == '-') {
			i, want = i+1, ExpectDigit
		}
		if i >= len(s) {
			return 0, p.eof(want)
		}
		if !isDigit(s[i]) {
			return 0, p.badChar(i, "in exponent of numeric literal", want)
		}
		i = digits(s, i+1)
	}
	return i, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// scanString validates the string literal at s[i] == '"' and returns the offset
// just past its closing quote. If utf is set it also reports how the contents
// must be kept (see str.grow); otherwise grow is meaningless and UTF-8 is not
// looked at, since invalid UTF-8 is no error.
func (p *parser) scanString(i int, utf bool) (end, grow int, err error) {
	s := p.s
	esc, high := false, false
	var hi uint64 // msb while looking for the first non-ASCII byte
	if utf {
		hi = msb
	}
	j := i + 1
	for {
		if j = plainEnd(s, j, hi); j >= len(s) {
			return 0, 0, p.eof(ExpectQuote)
		}
		switch c := s[j]; {
		case c == '"':
			if !utf {
				return j + 1, 0, nil
			}
			grow = -1
			if esc {
				grow = 0
			}
			// Pure ASCII needs no UTF-8 check, which spares most strings one.
			if raw := s[i+1 : j]; high && !utf8.ValidString(raw) {
				grow = 2 * countInvalid(raw) // each bad byte becomes the 3-byte U+FFFD
			}
			return j + 1, grow, nil
		case c >= utf8.RuneSelf:
			high, hi = true, 0
			j++
		case c == '\\':
			esc = true
			if j+1 >= len(s) {
				return 0, 0, p.eof(ExpectEscape)
			}
			switch s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				for k := j + 2; k < j+6; k++ {
					if k >= len(s) {
						return 0, 0, p.eof(ExpectHexDigit)
					}
					if hexVal(s[k]) < 0 {
						return 0, 0, p.badChar(k, `in \u hexadecimal character escape`, ExpectHexDigit)
					}
				}
				j += 6
			default:
				return 0, 0, p.badChar(j+1, "in string escape code", ExpectEscape)
			}
		default: // c < 0x20
			return 0, 0, p.badChar(j, "in string literal", ExpectNoControl)
		}
	}
}

func countInvalid(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n++
		}
		i += size
	}
	return n
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 reads t[0:8] as a little-endian word (the compiler makes it one load).
func load64(t string) uint64 {
	_ = t[7]
	return uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
		uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
}

// specials has the top bit set in each byte of w that is a quote, a backslash
// or a control byte, or, if hi is msb, >= 0x80. (x-lsb*n)&^x&msb is nonzero
// exactly when some byte of x is below n, and its lowest set bit marks the
// first such byte; borrows only disturb bytes above a true hit.
func specials(w, hi uint64) uint64 {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((w-lsb*0x20)&^w | (q-lsb)&^q | (b-lsb)&^b | w&hi) & msb
}

// plainEnd returns the offset of the first byte at or after j that is a quote,
// a backslash or a control byte, or, if hi is msb, >= 0x80; len(s) if none.
// Long runs are tested sixteen bytes at a time.
func plainEnd(s string, j int, hi uint64) int {
	t := s[j:]
	for len(t) >= 16 && specials(load64(t), hi)|specials(load64(t[8:]), hi) == 0 {
		t = t[16:]
	}
	for ; len(t) >= 8; t = t[8:] {
		if m := specials(load64(t), hi); m != 0 {
			return len(s) - len(t) + bits.TrailingZeros64(m)>>3
		}
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 && hi != 0 {
			return len(s) - len(t) + i
		}
	}
	return len(s)
}

// appendDecoded appends the decoding of raw, the contents of a validated string
// literal. valid says raw is valid UTF-8, so only escapes need attention.
func appendDecoded(dst []byte, raw string, valid bool) []byte {
	for i := 0; i < len(raw); {
		j := i
		if valid {
			if j = strings.IndexByte(raw[i:], '\\'); j < 0 {
				j = len(raw)
			} else {
				j += i
			}
		} else {
			for j < len(raw) && raw[j] != '\\' && raw[j] < utf8.RuneSelf {
				j++
			}
		}
		dst = append(dst, raw[i:j]...)
		if i = j; i == len(raw) {
			break
		}
		if raw[i] != '\\' {
			r, size := utf8.DecodeRuneInString(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
			continue
		}
		c := raw[i+1]
		i += 2
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i:])
			i += 4
			if 0xD800 <= r && r < 0xE000 {
				// Only a high surrogate escape directly followed by a low one
				// is a character; anything else is a lone surrogate.
				if r < 0xDC00 && i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := hex4(raw[i+2:]); 0xDC00 <= r2 && r2 < 0xE000 {
						r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
	}
	return dst
}

func hex4(s string) rune {
	return hexVal(s[0])<<12 | hexVal(s[1])<<8 | hexVal(s[2])<<4 | hexVal(s[3])
}

// AppendString appends s as a JSON string literal exactly as JSON.stringify
// would write it (escape `"` and `\`, \b \f \n \r \t, other controls below 0x20
// as \u00xx with lower-case hex; everything else, including < > & U+2028
// U+2029 and non-ASCII, written as is); invalid UTF-8 bytes become U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is pending, to be copied as is
	for i := 0; ; {
		if i = plainEnd(s, i, msb); i >= len(s) {
			break
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			}
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
