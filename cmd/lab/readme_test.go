package main

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeListsEveryFlag: the README's Configuration table has one row
// per flag, with its environment variable and the default the flag really
// has (from defaultConfig and server.DefaultConfig), and no other rows.
func TestReadmeListsEveryFlag(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("the README has no Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type row struct{ env, def string }
	rows := map[string]row{}
	cell := regexp.MustCompile("^`([^`]*)`$")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		name := strings.TrimPrefix(strings.Trim(cells[1], "`"), "-")
		def := cells[3]
		if m := cell.FindStringSubmatch(def); m != nil {
			def = m[1]
		} else if strings.HasPrefix(def, "(") {
			def = "" // "(none)", "(random, printed once at start)": no value
		} else if def != "" {
			t.Errorf("README row -%s: default %q is neither `value` nor (words)", name, def)
		}
		rows[name] = row{env: strings.Trim(cells[2], "`"), def: def}
	}

	c := defaultConfig()
	fs, all := newFlags("lab", &c, io.Discard)
	envs := map[string]string{}
	for _, s := range all {
		envs[s.flag] = s.env
	}
	seen := 0
	fs.VisitAll(func(f *flag.Flag) {
		seen++
		r, ok := rows[f.Name]
		if !ok {
			t.Errorf("flag -%s is not in the README's Configuration table", f.Name)
			return
		}
		def := f.DefValue
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && def == "false" {
			def = ""
		}
		if r.def != def {
			t.Errorf("-%s: the README says default %q, the flag has %q", f.Name, r.def, def)
		}
		if r.env != envs[f.Name] {
			t.Errorf("-%s: the README says variable %q, the flag reads %q", f.Name, r.env, envs[f.Name])
		}
	})
	if len(rows) != seen {
		for name := range rows {
			if fs.Lookup(name) == nil {
				t.Errorf("the README lists -%s, which is not a flag", name)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d flags registered", seen)
	}
}
