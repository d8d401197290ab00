// Package docs holds the project's documentation; its one test holds
// architecture.md's tree to the Go files of the module.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryGoFile: the tree in architecture.md names every
// Go file of the module but the tests, and nothing that is not there. A
// line whose first word ends in "/" opens a folder (inside the last folder
// opened less indented); a line whose first word ends in ".go" names a file
// in the folder open at it.
func TestArchitectureNamesEveryGoFile(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tree, ok := strings.Cut(string(doc), "\n## The tree\n")
	if !ok {
		t.Fatal(`architecture.md has no "## The tree" section`)
	}
	_, tree, _ = strings.Cut(tree, "```\n")
	tree, _, _ = strings.Cut(tree, "```")

	named := map[string]bool{}
	type open struct {
		indent int
		path   string
	}
	var folders []open
	for _, line := range strings.Split(tree, "\n") {
		word, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		indent := len(line) - len(strings.TrimLeft(line, " "))
		for len(folders) > 0 && folders[len(folders)-1].indent >= indent && strings.HasSuffix(word, "/") {
			folders = folders[:len(folders)-1]
		}
		switch {
		case strings.HasSuffix(word, "/"):
			parent := ""
			if len(folders) > 0 {
				parent = folders[len(folders)-1].path
			}
			folders = append(folders, open{indent, parent + word})
		case strings.HasSuffix(word, ".go"):
			if len(folders) == 0 {
				t.Errorf("%s is named outside any folder", word)
				continue
			}
			named[folders[len(folders)-1].path+word] = true
		}
	}

	var files []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel("..", path)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !named[f] {
			t.Errorf("docs/architecture.md's tree does not name %s", f)
		}
	}
	for f := range named {
		if !slices.Contains(files, f) {
			t.Errorf("docs/architecture.md's tree names %s, which is not in the module", f)
		}
	}
}
