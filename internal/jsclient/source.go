package jsclient

import (
	"fmt"
	"strings"
)

// The four functions a module must expose, in the order the errors name them.
var wanted = [...]string{"begin", "receive", "expire", "view"}

// SourceError is a program the lab cannot load: a syntax error, an import,
// an export form it does not take, a missing function or a throw at the
// top level. Line and Column are 1-based positions in the source as
// written (0 when the error has no place, such as a missing function).
type SourceError struct {
	Kind    SourceErrorKind
	Line    int
	Column  int
	Message string // a sentence, with its place when it has one
}

func (e *SourceError) Error() string { return e.Message }

// SourceErrorKind says which way a source was refused.
type SourceErrorKind uint8

const (
	SyntaxError SourceErrorKind = iota + 1
	ImportRefused
	ExportRefused
	MissingFunction
	LoadFailed // the top level threw or ran out of its budget
)

// rewritten is a module made into a script: the same text with its export
// syntax blanked out (so that lines and columns stay those of the source),
// and for each of the four functions the local name it is exported from.
type rewritten struct {
	script string
	local  map[string]string // exported name -> local binding
	module bool              // it had export syntax
}

// rewrite turns an ES module with no imports, or a plain script, into a
// script goja can run. It understands `export function f`, `export const
// f = …` (let, var, async function, function*), and `export { a, b as c }`;
// it refuses `import` and `export default`. It reads just enough of
// JavaScript (strings, templates, comments, regular expressions, braces)
// to find those at the top level; anything it misreads ends as a syntax
// error from the engine, never as a panic.
func rewrite(src string) (rewritten, error) {
	out := []byte(src)
	r := rewritten{local: map[string]string{}}
	lx := lexer{src: src}
	blank := func(from, to int) {
		for i := from; i < to && i < len(out); i++ {
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	for {
		tok := lx.next()
		if tok.kind == tokEOF {
			break
		}
		if tok.kind != tokIdent || lx.depth != 0 || !tok.stmtStart {
			continue
		}
		switch tok.text {
		case "import":
			// import(...) and import.meta are expressions, not declarations,
			// but a module that uses either needs a host the lab is not.
			line, col := position(src, tok.pos)
			return r, &SourceError{Kind: ImportRefused, Line: line, Column: col,
				Message: fmt.Sprintf("Line %d, column %d: import is not allowed: the module must be self-contained (no imports).", line, col)}
		case "export":
			r.module = true
			if err := r.export(&lx, tok, src, blank); err != nil {
				return r, err
			}
		}
	}
	if !r.module {
		for _, name := range wanted {
			r.local[name] = name
		}
	}
	r.script = string(out)
	return r, nil
}

// export reads one export declaration after its keyword and blanks what the
// script must not see.
func (r *rewritten) export(lx *lexer, kw token, src string, blank func(int, int)) error {
	refuse := func(pos int, what string) error {
		line, col := position(src, pos)
		return &SourceError{Kind: ExportRefused, Line: line, Column: col,
			Message: fmt.Sprintf("Line %d, column %d: %s is not supported: export the functions by name (export function begin…, or export { begin, receive, expire, view }).", line, col, what)}
	}
	next := lx.next()
	switch {
	case next.kind == tokPunct && next.text == "{":
		// export { a, b as c, }; the whole clause goes.
		for {
			t := lx.next()
			if t.kind == tokPunct && t.text == "}" {
				end := t.pos + 1
				// an optional `from "…"` would be a re-export: an import.
				save := *lx
				if f := lx.next(); f.kind == tokIdent && f.text == "from" {
					return refuse(f.pos, "export … from")
				}
				*lx = save
				blank(kw.pos, end)
				return nil
			}
			if t.kind != tokIdent {
				if t.kind == tokPunct && t.text == "," {
					continue
				}
				return refuse(t.pos, "this export clause")
			}
			local, exported := t.text, t.text
			save := *lx
			if a := lx.next(); a.kind == tokIdent && a.text == "as" {
				n := lx.next()
				if n.kind != tokIdent && n.kind != tokString {
					return refuse(n.pos, "this export clause")
				}
				exported = strings.Trim(n.text, `"'`)
			} else {
				*lx = save
			}
			r.local[exported] = local
		}
	case next.kind == tokIdent && next.text == "default":
		return refuse(next.pos, "export default")
	case next.kind == tokPunct && next.text == "*":
		return refuse(next.pos, "export *")
	case next.kind == tokIdent:
		blank(kw.pos, kw.pos+len("export"))
		switch next.text {
		case "async":
			next = lx.next()
			if next.kind != tokIdent || next.text != "function" {
				return refuse(next.pos, "this export")
			}
			fallthrough
		case "function", "class":
			n := lx.next()
			if n.kind == tokPunct && n.text == "*" {
				n = lx.next()
			}
			if n.kind != tokIdent {
				return refuse(n.pos, "this export")
			}
			r.local[n.text] = n.text
		case "const", "let", "var":
			// export const a = …, b = …: only the first name is read
			// before its initializer; a module exports its functions one by
			// one or in a clause.
			n := lx.next()
			if n.kind != tokIdent {
				return refuse(n.pos, "a destructuring export")
			}
			r.local[n.text] = n.text
		default:
			return refuse(next.pos, "this export")
		}
		return nil
	}
	return refuse(next.pos, "this export")
}

// position gives the 1-based line and column (in characters) of a byte offset.
func position(src string, off int) (line, col int) {
	line, col = 1, 1
	for _, c := range src[:min(off, len(src))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokPunct
	tokOther // numbers, templates, regular expressions
)

type token struct {
	kind      tokKind
	text      string
	pos       int
	stmtStart bool // nothing but `;`, `}` or the start of the file before it
}

// lexer is a forgiving scanner of JavaScript's surface: enough to tell code
// from strings, comments, templates and regular expressions, and to count
// braces. It never fails: unterminated things run to the end of the text.
type lexer struct {
	src       string
	i         int
	depth     int // brace depth outside templates
	prev      token
	havePrev  bool
	templates []int // brace depths at which a template's ${ … } resumes
}

func (lx *lexer) next() token {
	src := lx.src
	for lx.i < len(src) {
		c := src[lx.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.i++
			continue
		case c == '/' && lx.i+1 < len(src) && src[lx.i+1] == '/':
			for lx.i < len(src) && src[lx.i] != '\n' {
				lx.i++
			}
			continue
		case c == '/' && lx.i+1 < len(src) && src[lx.i+1] == '*':
			end := strings.Index(src[lx.i+2:], "*/")
			if end < 0 {
				lx.i = len(src)
			} else {
				lx.i += end + 4
			}
			continue
		}
		start := lx.i
		t := token{pos: start, stmtStart: !lx.havePrev ||
			(lx.prev.kind == tokPunct && (lx.prev.text == ";" || lx.prev.text == "}" || lx.prev.text == "{"))}
		switch {
		case isIdentStart(c):
			for lx.i < len(src) && isIdentPart(src[lx.i]) {
				lx.i++
			}
			t.kind, t.text = tokIdent, src[start:lx.i]
		case c >= '0' && c <= '9':
			for lx.i < len(src) && (isIdentPart(src[lx.i]) || src[lx.i] == '.') {
				lx.i++
			}
			t.kind = tokOther
		case c == '"' || c == '\'':
			lx.i++
			for lx.i < len(src) && src[lx.i] != c && src[lx.i] != '\n' {
				if src[lx.i] == '\\' {
					lx.i++
				}
				lx.i++
			}
			lx.i = min(lx.i+1, len(src))
			t.kind, t.text = tokString, src[start:lx.i]
		case c == '`':
			lx.i++
			lx.template()
			t.kind = tokOther
		case c == '}' && len(lx.templates) > 0 && lx.templates[len(lx.templates)-1] == lx.depth:
			lx.templates = lx.templates[:len(lx.templates)-1]
			lx.i++
			lx.template()
			t.kind = tokOther
		case c == '/' && lx.regexAllowed():
			lx.i++
			inClass := false
			for lx.i < len(src) && src[lx.i] != '\n' {
				d := src[lx.i]
				if d == '\\' {
					lx.i += 2
					continue
				}
				lx.i++
				if d == '[' {
					inClass = true
				} else if d == ']' {
					inClass = false
				} else if d == '/' && !inClass {
					break
				}
			}
			for lx.i < len(src) && isIdentPart(src[lx.i]) {
				lx.i++
			}
			lx.i = min(lx.i, len(src))
			t.kind = tokOther
		default:
			lx.i++
			t.kind, t.text = tokPunct, string(c)
			switch c {
			case '{':
				lx.depth++
			case '}':
				if lx.depth > 0 {
					lx.depth--
				}
			}
		}
		lx.prev, lx.havePrev = t, true
		return t
	}
	return token{kind: tokEOF, pos: len(src)}
}

// template reads a template literal's text up to its closing backquote, or
// up to a `${`, after which the lexer reads code until the matching brace.
func (lx *lexer) template() {
	src := lx.src
	for lx.i < len(src) {
		switch src[lx.i] {
		case '\\':
			lx.i += 2
			continue
		case '`':
			lx.i++
			return
		case '$':
			if lx.i+1 < len(src) && src[lx.i+1] == '{' {
				lx.i += 2
				lx.templates = append(lx.templates, lx.depth)
				return
			}
		}
		lx.i++
	}
	lx.i = len(src)
}

// regexAllowed says whether a slash here starts a regular expression rather
// than a division: after an operator, an opening bracket or a keyword.
func (lx *lexer) regexAllowed() bool {
	if !lx.havePrev {
		return true
	}
	p := lx.prev
	switch p.kind {
	case tokIdent:
		switch p.text {
		case "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else", "yield", "await":
			return true
		}
		return false
	case tokString, tokOther:
		return false
	}
	return p.text != ")" && p.text != "]" && p.text != "}"
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
