package server

import (
	"testing"
	"time"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// TestOneEventVocabulary: the timeline, the store and the exports name
// every event kind with the same word, and the store reads each word back
// as the same kind.
func TestOneEventVocabulary(t *testing.T) {
	t.Parallel()
	reply := model.Message{ID: 1, Kind: model.ReplyMessage, From: model.Student, Raw: "{}"}
	deadline := model.Message{ID: 1, Kind: model.DeadlineMessage, From: model.Instructor, Key: model.Key{RunID: "run-1", CallID: "lookup"}}
	for _, tt := range []struct {
		ev          model.Event
		want        string
		messageKind string
	}{
		{model.Event{Kind: model.RunStarted, By: model.Student}, "started", ""},
		{model.Event{Kind: model.MessageQueued, By: model.Student, Message: reply}, "queued", "reply"},
		{model.Event{Kind: model.MessageDelivered, By: model.Student, Message: model.Message{ID: 1}}, "delivered", ""},
		{model.Event{Kind: model.Renamed, By: model.Student, Name: "Ada"}, "renamed", ""},
		{model.Event{Kind: model.MessageInjected, By: model.Instructor, Message: deadline}, "injected", "deadline"},
		{model.Event{Kind: model.MessageInjected, By: model.Instructor, Message: deadline, Deliver: true}, "injected-delivered", "deadline"},
	} {
		e := newTimelineEntry(tt.ev, 1, model.NewLab(), "", time.Time{})
		if e.Kind != tt.want || store.Kind(tt.ev) != tt.want || e.MessageKind != tt.messageKind {
			t.Errorf("%+v: timeline %q (%q), store %q, want %q (%q)", tt.ev, e.Kind, e.MessageKind, store.Kind(tt.ev), tt.want, tt.messageKind)
		}
		kind, deliver, ok := model.ParseKindName(tt.want)
		if !ok || kind != tt.ev.Kind || deliver != tt.ev.Deliver {
			t.Errorf("%q reads back as %v deliver=%v ok=%v", tt.want, kind, deliver, ok)
		}
	}
	if _, _, ok := model.ParseKindName("start"); ok {
		t.Error(`"start" (a command's name) read as an event kind`)
	}
}
