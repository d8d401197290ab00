package model

import "testing"

func TestParseLanguage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Language
		ok   bool
	}{
		{"", JavaScript, true}, {"javascript", JavaScript, true}, {"rescript", ReScript, true},
		{"ReScript", 0, false}, {"js", 0, false}, {"typescript", 0, false},
	} {
		got, ok := ParseLanguage(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseLanguage(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok && tc.in != "" && got.String() != tc.in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
}

func TestTasksOf(t *testing.T) {
	eight, eleven := NonExhaustive, 11
	missing := func(example string) Diagnostic {
		return Diagnostic{Line: 104, Column: 26, EndLine: 112, EndColumn: 3, Warning: &eight, Severity: SeverityError,
			Text: "You forgot to handle a possible case here, for example: \n| " + example}
	}
	for _, tc := range []struct {
		name string
		ds   []Diagnostic
		want CompilerTasks
	}{
		{"none", nil, CompilerTasks{}},
		{"the Rejected arm deleted", []Diagnostic{missing("Rejected(_)")}, CompilerTasks{MissingRejected: true}},
		{"Cancelled added, three matches", []Diagnostic{missing("Cancelled"), missing("Cancelled"), missing("Cancelled")}, CompilerTasks{AddCancelled: true}},
		{"both", []Diagnostic{missing("Cancelled"), missing("Rejected(_)")}, CompilerTasks{MissingRejected: true, AddCancelled: true}},
		{"a warning that did not stop the build", []Diagnostic{{Warning: &eight, Severity: SeverityWarning, Text: "for example: | Rejected(_)"}}, CompilerTasks{}},
		{"another warning naming Rejected", []Diagnostic{{Warning: &eleven, Severity: SeverityError, Text: "Rejected(_) is unused"}}, CompilerTasks{}},
		{"a type error naming Rejected", []Diagnostic{{Severity: SeverityError, Text: "for example: Rejected"}}, CompilerTasks{}},
		{"a longer constructor", []Diagnostic{missing("RejectedTwice"), missing("NotCancelled")}, CompilerTasks{}},
		{"named before the example only", []Diagnostic{{Warning: &eight, Severity: SeverityError, Text: "In Rejected: for example: | Pending"}}, CompilerTasks{}},
	} {
		if got := TasksOf(tc.ds); got != tc.want {
			t.Errorf("%s: TasksOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := (CompilerTasks{MissingRejected: true}).Or(CompilerTasks{AddCancelled: true}); got != (CompilerTasks{MissingRejected: true, AddCancelled: true}) {
		t.Errorf("Or = %+v", got)
	}
}
