package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolcall-lab/lab/internal/rescript"
	"github.com/toolcall-lab/lab/server"
)

// versionOnly is a compiler that says which it is and compiles nothing.
type versionOnly string

func (v versionOnly) Compile(context.Context, string) (rescript.Output, error) {
	return rescript.Output{}, &rescript.Error{Kind: rescript.Crashed, Message: "not a compiler"}
}
func (v versionOnly) Version() string { return string(v) }

// TestCodeJSONSaysTheVersionOnce: the compiler calls itself "ReScript
// 12.2.0"; GET /code.json's version is the number alone, as
// docs/protocol.md shows, so that the page's note says "ReScript 12.2.0",
// not "ReScript ReScript 12.2.0" (issue 52).
func TestCodeJSONSaysTheVersionOnce(t *testing.T) {
	t.Parallel()
	_, ts := runLab(t, server.Config{ReScript: versionOnly("ReScript 12.2.0")})
	var langs struct {
		ReScript struct {
			Version string `json:"version"`
		} `json:"rescript"`
	}
	if err := json.NewDecoder(get(t, ts, "/code.json").Body).Decode(&langs); err != nil || langs.ReScript.Version != "12.2.0" {
		t.Fatalf("GET /code.json: version %q, %v; want 12.2.0", langs.ReScript.Version, err)
	}
}
