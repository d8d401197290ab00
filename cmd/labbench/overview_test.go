package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	labserver "github.com/toolcall-lab/lab/server"
)

// TestOverviewSeqs: the scan of an overview frame finds every row's id and
// seq exactly as decoding the frame does, on the lab's own tables (names
// with quotes, braces and "seq" in them, a code row), and nothing in
// another frame.
func TestOverviewSeqs(t *testing.T) {
	t.Parallel()
	srv := startLab(t, labserver.Config{InstructorToken: instructorToken})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	names := []string{`Ada`, `"seq":9,{"id":"x"}`, `Bea \"quoted\" ]`, `],"exercise":{}`}
	want := map[string]uint64{}
	for i, name := range names {
		id := uuid.NewString()
		ws, err := dial(ctx, srv, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		frames := []string{`{"type":"start"}`}
		for range i {
			frames = append(frames, `{"type":"start"}`)
		}
		name, _ := json.Marshal(name)
		frames = append(frames, fmt.Sprintf(`{"type":"rename","name":%s}`, name))
		for _, f := range frames {
			if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
				t.Fatal(err)
			}
		}
		want[id] = uint64(len(frames))
	}
	iws, err := dialInstructor(ctx, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer iws.CloseNow()
	for seen := 0; ; seen++ {
		_, data, err := iws.Read(ctx)
		if err != nil {
			t.Fatalf("no overview with every change after %d frames: %v", seen, err)
		}
		var f struct {
			Type     string `json:"type"`
			Sessions []struct {
				ID  string `json:"id"`
				Seq uint64 `json:"seq"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		decoded, scanned := map[string]uint64{}, map[string]uint64{}
		for _, r := range f.Sessions {
			decoded[r.ID] = r.Seq
		}
		overviewSeqs(data, func(id []byte, seq uint64) { scanned[string(id)] = seq })
		if !maps.Equal(decoded, scanned) || (f.Type != "overview" && len(scanned) > 0) {
			t.Fatalf("a %s frame decodes to %v, scans to %v:\n%s", f.Type, decoded, scanned, data)
		}
		if maps.Equal(scanned, want) {
			return
		}
	}
}
