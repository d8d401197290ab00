package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/toolcall-lab/lab/model"
)

// FuzzDecodeFrame: any bytes either decode to a command that agrees with
// encoding/json's reading of the same frame, or are refused with a
// frame error (reason invalid_frame, which the client reads); never a panic or another error.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"start"}`, `{"type":"queueDeadline"}`, `{"type":"queueReply","raw":"{\"a\":1}"}`, `{"type":"practice"}`, `{"type":"practice","kind":7}`,
		`{"type":"deliver","message":3}`, `{"type":"deliver","message":2.0}`, `{"type":"deliver","message":1e400}`,
		`{"type":"queueReply","raw":"\ud800"}`, `{"type":"deliver","message":-0}`, `{"type":"start","raw":5}`,
		`{"type":"rename","name":"Ada"}`, `{"type":"rename","name":"  x  "}`, `{"type":"rename"}`,
		`{"type":"rename","name":7}`, `{"type":"rename","name":"\ud800"}`, `[]`, `{`, `{"type":"x"}`,
		`{"type":"deliver","message":1,"predict":"ignored"}`, `{"type":"deliver","message":1,"predict":""}`,
		`{"type":"deliver","message":1,"predict":null}`, `{"type":"deliver","message":1,"predict":"\u0061ccepted"}`,
		`{"type":"submitCode","source":"export function begin(){}"}`, `{"type":"submitCode"}`, `{"type":"submitCode","source":null}`,
		`{"type":"submitCode","source":"\u0000\ud83d\ude00"}`, `{"type":"submitCode","source":"` + strings.Repeat("\\u0061", model.MaxSourceBytes/6+1) + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decodeFrame(data, model.Student)
		if err != nil {
			var fe *Error
			var le *model.LimitError
			if errors.As(err, &le) && classify(nil, err).reason == "limit" {
				return // a program over model.MaxSourceBytes
			}
			if !errors.As(err, &fe) || fe.Reason != "invalid_frame" {
				t.Fatalf("error %v is not a frame error", err)
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
		case model.SubmitCode:
			var source string
			if err := json.Unmarshal(members["source"], &source); err != nil || cmd.Source != source || len(source) > model.MaxSourceBytes {
				t.Fatalf("source %.100s decoded as %.100q", members["source"], cmd.Source)
			}
		case model.Deliver:
			var message float64
			if err := json.Unmarshal(members["message"], &message); err != nil || cmd.Message < 1 || float64(cmd.Message) != message {
				t.Fatalf("message %s decoded as %d", members["message"], cmd.Message)
			}
			// No predict is no prediction; one present must be one of the
			// four words, as encoding/json reads it.
			if p, ok := members["predict"]; !ok {
				if cmd.Predict != model.NoPrediction {
					t.Fatalf("no predict decoded as %v", cmd.Predict)
				}
			} else {
				var word string
				if err := json.Unmarshal(p, &word); err != nil || cmd.Predict == model.NoPrediction || cmd.Predict.String() != word {
					t.Fatalf("predict %s decoded as %v", p, cmd.Predict)
				}
			}
		}
	})
}

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
			var fe *Error
			if !errors.As(err, &fe) || fe.Reason != "invalid_frame" {
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
			var re *Error
			if !errors.As(err, &re) || re.Text == "" || (re.Status != http.StatusBadRequest && re.Status != http.StatusRequestEntityTooLarge) {
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

// FuzzClassRequest: any body posted to create a class is either refused
// with a 4xx Error (which the client reads as {"error": …}) or is
// one JSON object whose title, once normalized, is 1 to maxTitleRunes
// characters with no control or format characters; never a panic.
func FuzzClassRequest(f *testing.F) {
	for _, s := range []string{
		`{"title":"Monday 10:00"}`, `{"title":"  x  ","predictionsRequired":true}`, `{"title":""}`,
		`{"title":"a\u202eb"}`, `{"title":7}`, `{}`, `{"title":"x"} {}`, `{"title":"x","y":1}`, `[`, `null`,
		`{"title":"\ud800"}`, `{"predictionsRequired":"yes","title":"x"}`,
	} {
		f.Add([]byte(s))
	}
	s := &Server{}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/classes", bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		c := echo.New().NewContext(req, httptest.NewRecorder())
		var in struct {
			Title               *string `json:"title"`
			PredictionsRequired bool    `json:"predictionsRequired"`
		}
		refused := func(err error) {
			var re *Error
			if !errors.As(err, &re) || re.Status < 400 || re.Status > 499 {
				t.Fatalf("%q: error %v is not a client error", data, err)
			}
		}
		if err := s.readJSON(c, &in); err != nil {
			refused(err)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted %q, which is not JSON", data)
		}
		if in.Title == nil {
			return
		}
		title, err := normalizeTitle(*in.Title)
		if err != nil {
			refused(err)
			return
		}
		if n := utf8.RuneCountInString(title); n == 0 || n > maxTitleRunes || title != strings.TrimSpace(title) {
			t.Fatalf("title %q accepted from %q", title, data)
		}
		if strings.IndexFunc(title, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
			t.Fatalf("title %q holds a control or format character", title)
		}
	})
}

// FuzzJoinName: a name typed at the door is either refused with a sentence
// for the page, or is a name the rename rules accept, with no format
// characters (which could make it pass for another in the console).
func FuzzJoinName(f *testing.F) {
	for _, s := range []string{"Ada", "  Ada  ", "", "a\u202eb", strings.Repeat("n", 41), "\x00", "\xff", "Zoë"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typed string) {
		name, problem := joinName(typed)
		if problem != "" {
			if name != "" {
				t.Fatalf("%q: refused (%s) but named %q", typed, problem, name)
			}
			return
		}
		again, err := model.NormalizeName(name)
		if err != nil || again != name || name == "" {
			t.Fatalf("%q: accepted as %q, which the rename rules do not keep (%q, %v)", typed, name, again, err)
		}
		if strings.IndexFunc(name, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) >= 0 {
			t.Fatalf("%q: accepted %q with a format character", typed, name)
		}
	})
}

// FuzzDecodeCaseRequest: a case request is refused with a request error,
// or gives a named case the checker can play and targets as an
// injection's.
func FuzzDecodeCaseRequest(f *testing.F) {
	for _, s := range []string{
		`{"name":"late","frames":[{"type":"queueReply","raw":"x"},{"type":"deliver","message":1}],"all":true}`,
		`{"name":"x","frames":[{"type":"start"}],"sessions":["a","a"]}`, `{"name":"x","frames":[],"all":true}`,
		`{"name":"","frames":[{"type":"start"}],"all":true}`, `{"name":"x","frames":[{"type":"deliver","message":1}],"all":true}`,
		`{"name":"x","frames":[{"type":"rename","name":"y"}],"all":true}`, `{"name":"x","frames":[{"type":"start"}]}`,
		`{"name":"x","frames":[{"type":"submitCode","source":""}],"all":true}`, `{"name":"x","frames":[1],"all":true}`,
		`{"name":"a\nb","frames":[{"type":"start"}],"class":"x"}`, `{"name":"x","frames":[{"type":"start"}],"all":true,"x":1}`,
		`{"name":"x","fromSession":"5f0c0d4e-0000-4000-8000-000000000001","fromRun":"run-2","all":true}`,
		`{"name":"x","fromFailure":"5f0c0d4e-0000-4000-8000-000000000001","class":"x"}`, `{"name":"x","fromRun":"run-2","all":true}`,
		`{"name":"x","frames":[{"type":"start"}],"fromSession":"5f0c0d4e-0000-4000-8000-000000000001","all":true}`,
		`{"name":"x","fromSession":"nope","all":true}`, `{"name":"x","fromSession":"5f0c0d4e-0000-4000-8000-000000000001","fromRun":"run-0","all":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, cs, from, err := decodeCaseRequest(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Text == "" {
				if !errors.Is(err, errNoSuchClass) && !errors.Is(err, errUnknownSession) {
					t.Fatalf("error %v is not a request error", err)
				}
			}
			return
		}
		if strings.TrimSpace(cs.Name) == "" || cs.Name != strings.TrimSpace(cs.Name) {
			t.Fatalf("case name %q", cs.Name)
		}
		if from.session != "" {
			// The frames are read from the session, then checked.
			if !canonicalID(from.session) || cs.Frames != nil || (from.failure == (from.fromRun > 0)) {
				t.Fatalf("a case from a session: %+v %+v", from, cs)
			}
		} else if err := model.ValidateTrace(cs.Frames); err != nil {
			t.Fatalf("accepted a case the checker cannot play: %v", err)
		}
		if !req.all && req.class == "" && len(req.sessions) == 0 {
			t.Fatal("accepted a case without targets")
		}
	})
}
