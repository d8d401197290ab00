package server

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

// FuzzDecodeFrame: any bytes either decode to a command that agrees with
// encoding/json's reading of the same frame, or are refused with a
// frameError (which the client reads); never a panic or another error.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"start"}`, `{"type":"queueDeadline"}`, `{"type":"queueReply","raw":"{\"a\":1}"}`,
		`{"type":"deliver","message":3}`, `{"type":"deliver","message":2.0}`, `{"type":"deliver","message":1e400}`,
		`{"type":"queueReply","raw":"\ud800"}`, `{"type":"deliver","message":-0}`, `{"type":"start","raw":5}`,
		`{"type":"rename","name":"Ada"}`, `{"type":"rename","name":"  x  "}`, `{"type":"rename"}`,
		`{"type":"rename","name":7}`, `{"type":"rename","name":"\ud800"}`, `[]`, `{`, `{"type":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decodeFrame(data, model.Student)
		if err != nil {
			var fe *frameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a frameError", err)
			}
			return
		}
		// encoding/json must read the same frame the same way. Only the
		// fields the command uses are compared: others may have any type.
		var members map[string]json.RawMessage
		if err := json.Unmarshal(data, &members); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		var typ string
		if err := json.Unmarshal(members["type"], &typ); err != nil || frameType(cmd.Kind) != typ {
			t.Fatalf("type %s decoded as %q", members["type"], frameType(cmd.Kind))
		}
		switch cmd.Kind {
		case model.Inject:
			t.Fatal("a student frame decoded to an injection")
		case model.Rename:
			var name string
			if err := json.Unmarshal(members["name"], &name); err != nil || cmd.Name != name {
				t.Fatalf("name %s decoded as %q", members["name"], cmd.Name)
			}
		case model.QueueReply:
			var raw string
			if err := json.Unmarshal(members["raw"], &raw); err != nil || cmd.Raw != raw {
				t.Fatalf("raw %s decoded as %q", members["raw"], cmd.Raw)
			}
		case model.Deliver:
			var message float64
			if err := json.Unmarshal(members["message"], &message); err != nil || cmd.Message < 1 || float64(cmd.Message) != message {
				t.Fatalf("message %s decoded as %d", members["message"], cmd.Message)
			}
		}
	})
}
