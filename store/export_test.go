package store_test

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"

	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

func TestExports(t *testing.T) {
	t.Parallel()
	recs := storetest.Sample("a")[2:5]
	var jl bytes.Buffer
	if err := store.WriteJSONLines(&jl, recs); err != nil {
		t.Fatal(err)
	}
	wantJL := `{"session":"a","seq":3,"time":"2026-03-01T09:00:02.000Z","actor":"student","kind":"delivered","message":2,"run":"run-1","notice":"notice 2"}
{"session":"a","seq":4,"time":"2026-03-01T09:00:03.000Z","actor":"student","kind":"delivered","message":1,"run":"run-1","notice":"notice 3","prediction":"ignored"}
{"session":"a","seq":5,"time":"2026-03-01T09:00:04.000Z","actor":"instructor","kind":"started","message":0,"run":"run-1","notice":"notice 4"}
`
	if jl.String() != wantJL {
		t.Fatalf("JSON lines:\n%s\nwant\n%s", jl.String(), wantJL)
	}
	var c bytes.Buffer
	w, err := store.NewCSV(&c)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(store.Session{ID: "a", Name: "Ada, B"}, recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	wantCSV := "session,name,seq,time,actor,kind,message,run,notice\n" +
		"a,\"Ada, B\",3,2026-03-01T09:00:02.000Z,student,delivered,2,run-1,notice 2\n" +
		"a,\"Ada, B\",4,2026-03-01T09:00:03.000Z,student,delivered,1,run-1,notice 3\n" +
		"a,\"Ada, B\",5,2026-03-01T09:00:04.000Z,instructor,started,,run-1,notice 4\n"
	if c.String() != wantCSV {
		t.Fatalf("CSV:\n%s\nwant\n%s", c.String(), wantCSV)
	}
}

// TestCSVDefusesFormulas: finding 6 of issue 10. A name a spreadsheet would
// run as a formula is written with a leading ', in every column, and
// nothing else changes.
func TestCSVDefusesFormulas(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"=1+1", "'=1+1"},
		{"@SUM(1+1)*cmd|'/C calc'!A0", "'@SUM(1+1)*cmd|'/C calc'!A0"},
		{"+1", "'+1"},
		{"-2", "'-2"},
		{"\tx", "'\tx"},
		{"\rx", "'\rx"},
		{"Ada = 1", "Ada = 1"},
		{"", ""},
		{"'quoted", "'quoted"},
	} {
		if got := store.CSVCell(tt.in); got != tt.want {
			t.Errorf("CSVCell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var b strings.Builder
	w, err := store.NewCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	recs := storetest.Sample("s")[:1]
	if err := w.Write(store.Session{ID: "s", Name: "=HYPERLINK(\"http://evil\")"}, recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := rows[1][1]; got != "'=HYPERLINK(\"http://evil\")" {
		t.Fatalf("name cell %q, want it prefixed with '", got)
	}
	if rows[1][0] != "s" || rows[1][2] != "1" {
		t.Fatalf("other cells changed: %q", rows[1])
	}
}
