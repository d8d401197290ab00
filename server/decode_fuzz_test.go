package server

import (
	"errors"
	"net/http"
	"testing"

	"github.com/toolcall-lab/lab/model"
)

// FuzzDecodeInstructorFrame: watch frames always name a canonical session id.
func FuzzDecodeInstructorFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"watch","session":"6ba7b810-9dad-41d1-80b4-00c04fd430c8"}`, `{"type":"unwatch"}`,
		`{"type":"watch","session":"6BA7B810-9DAD-41D1-80B4-00C04FD430C8"}`, `{"type":"watch"}`, `{}`, `x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decodeInstructorFrame(data)
		if err != nil {
			var fe *frameError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a frame error", err)
			}
			return
		}
		switch cmd.typ {
		case "watch":
			if !canonicalID(cmd.session) {
				t.Fatalf("watch of %q", cmd.session)
			}
		case "unwatch":
		default:
			t.Fatalf("decoded type %q", cmd.typ)
		}
	})
}

// FuzzDecodeInjectRequest: a request is refused with a 400 or 413 and a
// message, or it names targets and exactly one well-formed injection.
func FuzzDecodeInjectRequest(f *testing.F) {
	for _, s := range []string{
		`{"sessions":["a"],"preset":"staleReply"}`, `{"all":true,"mode":"deliver","preset":"deadline"}`,
		`{"sessions":["a","a"],"raw":""}`, `{"sessions":["a"],"deadline":{"runId":"","callId":""}}`,
		`{"sessions":["a"],"raw":"xxxxxxxxxxx"}`, `{"sessions":[],"preset":"x"}`, `{"all":true,"sessions":["a"]}`,
		`{"sessions":["a"],"preset":"deadline","mode":"now"}`, `{"sessions":["a"],"deadline":{}}`, `{} {}`, `null`,
	} {
		f.Add([]byte(s))
	}
	lim := model.Limits{MaxReplyBytes: 10}.WithDefaults()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeInjectRequest(body, lim)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.msg == "" || (re.status != http.StatusBadRequest && re.status != http.StatusRequestEntityTooLarge) {
				t.Fatalf("error %v is not a request error", err)
			}
			return
		}
		if req.all == (len(req.sessions) > 0) {
			t.Fatalf("targets: all %v, sessions %q", req.all, req.sessions)
		}
		seen := map[string]bool{}
		for _, id := range req.sessions {
			if seen[id] {
				t.Fatalf("session %q twice", id)
			}
			seen[id] = true
		}
		in := req.inject
		switch {
		case in.Preset != model.NoPreset:
			if _, ok := model.ParsePreset(in.Preset.String()); !ok || in.Raw != "" {
				t.Fatalf("preset injection %+v", in)
			}
		case in.Kind == model.ReplyMessage:
			if len(in.Raw) > lim.MaxReplyBytes {
				t.Fatalf("raw of %d bytes passed", len(in.Raw))
			}
		case in.Kind != model.DeadlineMessage:
			t.Fatalf("injection %+v", in)
		}
	})
}
