package rescript

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/toolcall-lab/lab/model"
)

// The compiler's messages, as it prints them without colour: a header
// ("Warning number 8 (configured as error)", "Warning number 32",
// "We've found a bug for you!", "Syntax error!"), the file and the range
// (ToolCall.res:104:26-112:3, :2:21, :5:51-54), a frame of the source, and
// the explanation, which runs to the next header.

var (
	headerRE = regexp.MustCompile(`^\s*(Warning number (\d+)( \(configured as error\))?|We've found a bug for you!|Syntax error!)\s*$`)
	placeRE  = regexp.MustCompile(`^\s*\S+\.res:(\d+):(\d+)(?:-(\d+)(?::(\d+))?)?\s*$`)
	// A frame's line: its number (or "." for lines left out) and "│", or
	// "│" alone where the compiler wraps a long line of the source.
	frameRE = regexp.MustCompile(`^\s*(?:(?:\d+|\.)\s+)?│`)
	ansiRE  = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// maxDiagnostics bounds the messages kept of one compile.
const maxDiagnostics = 100

// maxText bounds one message's explanation.
const maxText = 4 << 10

// ParseDiagnostics reads the compiler's messages. Positions are 1-based;
// End* is the range's last character (a range the compiler ends at column
// 0 of a line ends at column 1); a message without a place is at line 1.
func ParseDiagnostics(out string) []model.Diagnostic {
	lines := strings.Split(ansiRE.ReplaceAllString(out, ""), "\n")
	var ds []model.Diagnostic
	for i := 0; i < len(lines) && len(ds) < maxDiagnostics; i++ {
		m := headerRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		d := model.Diagnostic{Line: 1, Column: 1, EndLine: 1, EndColumn: 1, Severity: model.SeverityError}
		if m[2] != "" {
			n, _ := strconv.Atoi(m[2])
			d.Warning = &n
			if m[3] == "" {
				d.Severity = model.SeverityWarning
			}
		}
		i++
		if i < len(lines) {
			if p := placeRE.FindStringSubmatch(lines[i]); p != nil {
				d.Line, d.Column = atoi(p[1]), atoi(p[2])
				d.EndLine, d.EndColumn = d.Line, d.Column
				switch {
				case p[4] != "":
					d.EndLine, d.EndColumn = atoi(p[3]), atoi(p[4])
				case p[3] != "":
					d.EndColumn = atoi(p[3])
				}
				i++
			}
		}
		var text []string
		for ; i < len(lines); i++ {
			if headerRE.MatchString(lines[i]) {
				i--
				break
			}
			if frameRE.MatchString(lines[i]) {
				continue
			}
			text = append(text, strings.TrimRight(lines[i], " \t\r"))
		}
		d.Text = clip(dedent(text), maxText)
		d.Line, d.Column = max(d.Line, 1), max(d.Column, 1)
		d.EndColumn = max(d.EndColumn, 1)
		if d.EndLine < d.Line || d.EndLine == d.Line && d.EndColumn < d.Column {
			d.EndLine, d.EndColumn = d.Line, d.Column
		}
		ds = append(ds, d)
	}
	return ds
}

// dedent joins the explanation's lines without the blank ones around it
// and the two spaces the compiler indents it by.
func dedent(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<30 {
		return 1
	}
	return n
}
