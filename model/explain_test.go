package model

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestExplain(t *testing.T) {
	t.Parallel()
	key1, key2 := Key{"run-1", CallID}, Key{"run-2", CallID}
	pending2 := Begin("run-2", CallID)
	done2 := Call{Key: key2, Status: Completed, Text: "New answer"}
	rejected2 := Call{Key: key2, Status: Rejected, Text: "The query is empty"}
	empty2 := Call{Key: key2, Status: Completed}
	unresolved2 := Call{Key: key2, Status: Unresolved}
	replyTo := func(raw string) Message { return Message{Kind: ReplyMessage, Raw: raw} }
	deadlineFor := func(k Key) Message { return Message{Kind: DeadlineMessage, Key: k} }
	tests := []struct {
		name   string
		call   Call
		msg    Message
		notice string
		kind   DeliveryKind
		why    string
	}{
		{"stale reply", done2, replyTo(completion("run-1", "Old answer")), NoticeReplyOtherCall, KindStaleReply,
			"this reply is for run-1; the current call is run-2/lookup"},
		{"a later run's reply", pending2, replyTo(completion("run-7", "x")), NoticeReplyOtherCall, KindStaleReply,
			"this reply is for run-7; the current call is run-2/lookup"},
		{"another callId", pending2, replyTo(`{"runId":"run-2","callId":"search","kind":"completed","output":"x"}`), NoticeReplyOtherCall, KindWrongCallID,
			"this reply is for run-2/search; the current call is run-2/lookup"},
		{"another run and callId", pending2, replyTo(`{"runId":"run-1","callId":"search","kind":"completed","output":"x"}`), NoticeReplyOtherCall, KindWrongCallID,
			"this reply is for run-1/search; the current call is run-2/lookup"},
		{"empty runId", pending2, replyTo(`{"runId":"","callId":"lookup","kind":"completed","output":"x"}`), NoticeReplyOtherCall, KindStaleReply,
			"this reply is for /lookup; the current call is run-2/lookup"},
		{"duplicate", done2, replyTo(completion("run-2", "New answer")), NoticeReplyAlreadyFinal, KindDuplicate,
			"a duplicate of the final reply: the call already has its final outcome: New answer"},
		{"another output", done2, replyTo(completion("run-2", "Other")), NoticeReplyAlreadyFinal, KindContradictory,
			"the call already has its final outcome: New answer"},
		{"opposite kind", done2, replyTo(rejection("run-2", "New answer")), NoticeReplyAlreadyFinal, KindContradictory,
			"the call already has its final outcome: New answer"},
		{"duplicate rejection", rejected2, replyTo(rejection("run-2", "The query is empty")), NoticeReplyAlreadyFinal, KindDuplicate,
			"a duplicate of the final reply: the call already has its final outcome: rejected: The query is empty"},
		{"after an empty output", empty2, replyTo(completion("run-2", "x")), NoticeReplyAlreadyFinal, KindContradictory,
			"the call already has its final outcome: an empty output"},
		{"matching", pending2, replyTo(completion("run-2", "x")), NoticeAcceptedComplete, KindMatchingReply,
			"the reply matches run-2/lookup, which was Pending: the first final reply wins"},
		{"late", unresolved2, replyTo(rejection("run-2", "r")), NoticeAcceptedReject, KindLateReply,
			"the reply matches run-2/lookup: a late reply still resolves an Unresolved call"},
		{"lone brace", pending2, replyTo(`{`), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 1: expected a string or "}", found the end of the text`},
		{"empty", pending2, replyTo(``), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 0: expected a value, found the end of the text`},
		{"the issue's position 42", pending2, replyTo(`{"runId":"run-2","callId":"lookup","kind":completed}`), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 42: expected a value, found "c"`},
		{"a missing key", pending2, replyTo(`{"runId":"run-2",}`), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 17: expected a string, found "}"`},
		{"position in UTF-16", pending2, replyTo(`{"runId":"😀é"x}`), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 14: expected "," or "}", found "x"`},
		{"a bad byte", pending2, replyTo("\xff"), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 0: expected a value, found the byte 0xff`},
		{"single quotes", pending2, replyTo(`{'runId':1}`), NoticeInvalidJSON, KindMalformedJSON,
			`not valid JSON at position 1: expected a string or "}", found "'"`},
		{"numeric output", pending2, replyTo(`{"runId":"run-2","callId":"lookup","kind":"completed","output":42}`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: output is a number, not a string (a completed reply needs a string output)"},
		{"missing reason", pending2, replyTo(`{"runId":"run-2","callId":"lookup","kind":"rejected","output":"x"}`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: reason is missing (a rejected reply needs a string reason)"},
		{"array", pending2, replyTo(`[]`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: it is an array, not an object"},
		{"null", pending2, replyTo(`null`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: it is null, not an object"},
		{"string", pending2, replyTo(`"x"`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: it is a string, not an object"},
		{"numeric runId", pending2, replyTo(`{"runId":2,"callId":"lookup","kind":"completed","output":"x"}`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: runId is a number, not a string"},
		{"object callId", pending2, replyTo(`{"runId":"run-2","callId":{},"kind":"completed","output":"x"}`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: callId is an object, not a string"},
		{"no kind", pending2, replyTo(`{"runId":"run-2","callId":"lookup","output":"x"}`), NoticeInvalidReply, KindWrongShape,
			"valid JSON but not a reply: kind is missing"},
		{"unknown kind", pending2, replyTo(`{"runId":"run-2","callId":"lookup","kind":"Completed","output":"x"}`), NoticeInvalidReply, KindWrongShape,
			`valid JSON but not a reply: kind is "Completed", not "completed" or "rejected"`},
		{"deadline while Pending", pending2, deadlineFor(key2), NoticeUnresolved, KindDeadline,
			"no final reply for run-2/lookup before its deadline; a matching late reply can still resolve it"},
		{"deadline again", unresolved2, deadlineFor(key2), NoticeStillUnresolved, KindDeadline,
			"run-2/lookup is already Unresolved; another deadline changes nothing"},
		{"deadline after the result", done2, deadlineFor(key2), NoticeDeadlineFinal, KindDeadline,
			"the call already has its final outcome: New answer"},
		{"an older run's deadline", pending2, deadlineFor(key1), NoticeDeadlineOtherCall, KindStaleDeadline,
			"this deadline is for run-1; the current call is run-2/lookup"},
		{"a deadline for another callId", done2, deadlineFor(Key{"run-9", "x"}), NoticeDeadlineOtherCall, KindStaleDeadline,
			"this deadline is for run-9/x; the current call is run-2/lookup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Explain(tt.call, tt.msg)
			if d.Notice != tt.notice || d.Kind != tt.kind || d.Why != tt.why {
				t.Fatalf("Explain = %q, %v, %q\nwant      %q, %v, %q", d.Notice, d.Kind, d.Why, tt.notice, tt.kind, tt.why)
			}
			// Explain delivers exactly as Receive and Expire do.
			want := Expire(tt.call, tt.msg.Key)
			if tt.msg.Kind == ReplyMessage {
				want = Receive(tt.call, tt.msg.Raw)
			}
			if d.Update != want {
				t.Fatalf("Explain's update %+v, the seed's %+v", d.Update, want)
			}
		})
	}
}

// FuzzExplain checks that Explain agrees with Receive, says why for every
// reply, and that its diagnostics name a position inside the text.
func FuzzExplain(f *testing.F) {
	for _, s := range []string{``, `{`, `[]`, `{"runId":"run-2","callId":"lookup","kind":"completed","output":42}`,
		completion("run-2", "x"), completion("run-1", "x"), rejection("run-2", ""), "\xff{", `{"a":"😀"x`} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, raw string, status uint8) {
		c := Call{Key: Key{"run-2", CallID}, Status: Status(status % 4), Text: "New answer"}
		d := Explain(c, Message{Kind: ReplyMessage, Raw: raw})
		if d.Update != Receive(c, raw) || d.Why == "" || d.Kind >= numDeliveryKinds {
			t.Fatalf("Explain(%q) = %+v", raw, d)
		}
		if (d.Kind == KindMalformedJSON) != (d.Notice == NoticeInvalidJSON) ||
			(d.Kind == KindWrongShape) != (d.Notice == NoticeInvalidReply) {
			t.Fatalf("Explain(%q): kind %v with notice %q", raw, d.Kind, d.Notice)
		}
		if d.Kind == KindMalformedJSON && !strings.HasPrefix(d.Why, "not valid JSON at position ") {
			t.Fatalf("Explain(%q).Why = %q", raw, d.Why)
		}
		if d.Kind == KindWrongShape && (!strings.HasPrefix(d.Why, "valid JSON but not a reply: ") || strings.HasSuffix(d.Why, "it does not decode")) {
			t.Fatalf("Explain(%q).Why = %q", raw, d.Why)
		}
	})
}

func TestClassifyNotice(t *testing.T) {
	t.Parallel()
	cases := map[string]Prediction{
		NoticeAcceptedComplete:  PredictAccepted,
		NoticeAcceptedReject:    PredictAccepted,
		NoticeReplyOtherCall:    PredictIgnored,
		NoticeReplyAlreadyFinal: PredictIgnored,
		NoticeDeadlineOtherCall: PredictIgnored,
		NoticeDeadlineFinal:     PredictIgnored,
		NoticeUnresolved:        PredictUnresolved,
		NoticeStillUnresolved:   PredictUnresolved,
		NoticeInvalidJSON:       PredictDiagnostic,
		NoticeInvalidReply:      PredictDiagnostic,
		NoticeReady:             NoPrediction,
		NoticeStarted:           NoPrediction,
		"":                      NoPrediction,
		"accepted":              NoPrediction,
	}
	for notice, want := range cases {
		if got := ClassifyNotice(notice); got != want {
			t.Errorf("ClassifyNotice(%q) = %v, want %v", notice, got, want)
		}
	}
	// DeliveryNotices are exactly the notices that bear out a prediction.
	var bearing []string
	for notice, p := range cases {
		if p != NoPrediction {
			bearing = append(bearing, notice)
		}
	}
	got := DeliveryNotices()
	slices.Sort(got)
	slices.Sort(bearing)
	if !slices.Equal(got, bearing) {
		t.Errorf("DeliveryNotices() = %q, want %q", got, bearing)
	}
}

func TestParsePrediction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		word string
		want Prediction
		ok   bool
	}{
		{"accepted", PredictAccepted, true}, {"ignored", PredictIgnored, true}, {"unresolved", PredictUnresolved, true},
		{"diagnostic", PredictDiagnostic, true}, {"", NoPrediction, true},
		{"Accepted", NoPrediction, false}, {"rejected", NoPrediction, false}, {"invalid", NoPrediction, false}, {" ignored", NoPrediction, false},
	} {
		got, ok := ParsePrediction(c.word)
		if got != c.want || ok != c.ok {
			t.Errorf("ParsePrediction(%q) = %v, %v", c.word, got, ok)
		}
		if ok && got.String() != c.word {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if Prediction(9).String() != "prediction(9)" || DeliveryKind(99).String() != "deliveryKind(99)" || DeliveryKind(99).Phrase() != "deliveryKind(99)" {
		t.Fatal("out-of-range names")
	}
}

func TestDeliveryKindNames(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for k := DeliveryKind(0); int(k) < NumDeliveryKinds; k++ {
		if k.String() == "" || k.Phrase() == "" || seen[k.String()] {
			t.Errorf("kind %d: %q %q", k, k.String(), k.Phrase())
		}
		seen[k.String()] = true
	}
	// The eight kinds are among them, by name.
	for _, name := range []string{"staleReply", "duplicate", "contradictory", "wrongCallId", "malformedJson", "wrongShape", "deadline", "lateReply"} {
		if !seen[name] {
			t.Errorf("no kind %q", name)
		}
	}
}

// TestPredictions: the prediction is recorded in the event, and the receipt
// says whether the notice bore it out; the session counts both.
func TestPredictions(t *testing.T) {
	t.Parallel()
	predict := func(id int, p Prediction) Command { return Command{Kind: Deliver, Message: id, Predict: p} }
	l, events := run(t, []Command{
		queue(completion("run-1", "Old")), start(), queue(completion("run-2", "New")), queueDeadline(),
		predict(2, PredictAccepted),   // right
		predict(1, PredictAccepted),   // wrong: a stale reply is ignored
		predict(3, PredictUnresolved), // wrong: the deadline meets a final call
		deliver(1),                    // no prediction
		predict(1, PredictIgnored),    // right
	})
	if got := events[4].Prediction; got != PredictAccepted {
		t.Fatalf("event's prediction %v", got)
	}
	type got struct {
		p     Prediction
		right bool
		kind  DeliveryKind
	}
	want := []got{{PredictAccepted, true, KindMatchingReply}, {PredictAccepted, false, KindStaleReply}, {PredictUnresolved, false, KindDeadline},
		{NoPrediction, false, KindStaleReply}, {PredictIgnored, true, KindStaleReply}}
	v := l.View()
	for i, r := range v.Receipts {
		if g := (got{r.Predicted, r.Right, r.Kind}); g != want[i] {
			t.Errorf("receipt %d: %+v, want %+v", i+1, g, want[i])
		}
	}
	if v.Predicted != 4 || v.Right != 2 {
		t.Fatalf("%d predicted, %d right; want 4, 2", v.Predicted, v.Right)
	}
	replayed := NewLab()
	for _, e := range events {
		replayed.Apply(e)
	}
	if rv := replayed.View(); rv.Predicted != 4 || rv.Right != 2 || rv.Receipts[1] != v.Receipts[1] {
		t.Fatalf("replay: %d, %d, %+v", rv.Predicted, rv.Right, rv.Receipts[1])
	}
	// An unknown prediction is refused; so is such an event.
	if _, err := l.Decide(predict(1, numPredictions), Limits{}); !errors.Is(err, ErrUnknownPrediction) {
		t.Fatalf("Decide with an unknown prediction: %v", err)
	}
	if _, err := l.Apply(Event{Kind: MessageDelivered, Message: Message{ID: 1}, Prediction: 7}); !errors.Is(err, ErrUnknownPrediction) {
		t.Fatalf("Apply with an unknown prediction: %v", err)
	}
}

// TestNumbers: the student's messages and the instructor's are numbered
// apart, ids still count up, and a replay that lost the numbers (a stored
// log keeps none) numbers them again the same way.
func TestNumbers(t *testing.T) {
	t.Parallel()
	l, events := run(t, []Command{
		queue("a"), injectReply("b", false), queueDeadline(), byInstructor(queue("c")), injectDeadline("run-1", true), queue("d"),
	})
	var ids, numbers []string
	for _, m := range l.View().Queue {
		ids, numbers = append(ids, strings.Repeat("x", m.ID)), append(numbers, m.Number)
	}
	if got := strings.Join(numbers, " "); got != "1 I1 2 I2 I3 3" {
		t.Fatalf("numbers %q", got)
	}
	if len(ids) != 6 || ids[5] != "xxxxxx" {
		t.Fatalf("ids %v", ids)
	}
	if r := l.View().Receipts[0]; r.Number != "I3" || r.From != Instructor || r.By != Instructor {
		t.Fatalf("receipt %+v", r)
	}
	replayed := NewLab()
	for _, e := range events {
		e.Message.Number = "" // as the store gives it back
		if _, err := replayed.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range replayed.View().Queue {
		if m.Number != numbers[i] {
			t.Fatalf("replayed message %d numbered %q, want %q", m.ID, m.Number, numbers[i])
		}
	}
}

func TestTallyPredictions(t *testing.T) {
	t.Parallel()
	predict := func(id int, p Prediction) Command { return Command{Kind: Deliver, Message: id, Predict: p} }
	a, _ := run(t, []Command{queue(completion("run-1", "Old")), start(), queue(completion("run-2", "New")),
		predict(1, PredictAccepted), predict(1, PredictIgnored), predict(2, PredictAccepted), deliver(1)})
	b, _ := run(t, []Command{queue(completion("run-1", "Old")), start(), predict(1, PredictAccepted), predict(1, PredictUnresolved)})
	ta, tb := TallyPredictions(a.View().Receipts), TallyPredictions(b.View().Receipts)
	if ta.Made != 3 || ta.Right != 2 || ta.Made != a.View().Predicted || ta.Right != a.View().Right {
		t.Fatalf("session a: %d made, %d right", ta.Made, ta.Right)
	}
	class := ta
	class.Merge(tb)
	stale := class.ByKind[KindStaleReply]
	want := KindTally{Made: 4, Right: 1}
	want.Said[PredictAccepted], want.Said[PredictIgnored], want.Said[PredictUnresolved] = 2, 1, 1
	if stale != want || class.Made != 5 || class.Right != 2 || class.ByKind[KindMatchingReply].Made != 1 {
		t.Fatalf("class tally: %+v", class)
	}
	if got := Expectation(KindStaleReply, PredictAccepted, stale.Said[PredictAccepted], stale.Made); got != "2 of 4 expected a stale reply to be accepted" {
		t.Fatalf("Expectation = %q", got)
	}
	if got := Expectation(KindDeadline, PredictUnresolved, 1, 3); got != "1 of 3 expected a deadline to leave the call Unresolved" {
		t.Fatalf("Expectation = %q", got)
	}
	var empty PredictionTally
	empty.Add(Receipt{Kind: KindStaleReply, Right: true})
	if empty != (PredictionTally{}) {
		t.Fatal("a receipt without a prediction was counted")
	}
}
