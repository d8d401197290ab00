package model

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// arrived is what a test checks of one arrival: which message, on which
// seq, with what outcome, and who delivered it.
type arrived struct {
	Message int
	Seq     uint64
	Outcome ArrivalOutcome
	By      Actor
}

// sent is what a test checks of one message: its number, the lane it left
// and when.
type sent struct {
	Number string
	Lane   int
	Seq    uint64
	From   Actor
}

func arrivals(d Diagram) []arrived {
	out := []arrived{}
	for _, a := range d.Arrivals {
		out = append(out, arrived{a.Message, a.Seq, a.Outcome, a.By})
	}
	return out
}

func sends(d Diagram) []sent {
	out := []sent{}
	for _, m := range d.Messages {
		out = append(out, sent{m.Number, m.Lane, m.Seq, m.From})
	}
	return out
}

func laneStarts(d Diagram) map[string]uint64 {
	out := map[string]uint64{}
	for _, l := range d.Lanes {
		out[l.Name] = l.Start
	}
	return out
}

func TestDiagramOfTrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		trace    []Command
		lanes    map[string]uint64
		sends    []sent
		arrivals []arrived
	}{
		{"nothing yet", nil, map[string]uint64{"client": 0, "run-1": 0}, []sent{}, []arrived{}},
		{"a held reply is sent and never arrives",
			[]Command{queue(completion("run-1", "Old answer"))},
			map[string]uint64{"client": 0, "run-1": 0},
			[]sent{{"1", 1, 1, Student}}, []arrived{}},
		{"an older run's reply leaves its own lane and arrives in the newer run, ignored",
			[]Command{queue(completion("run-1", "Old answer")), start(), queue(completion("run-2", "New answer")), deliver(2), deliver(1)},
			map[string]uint64{"client": 0, "run-1": 0, "run-2": 2},
			[]sent{{"1", 1, 1, Student}, {"2", 2, 3, Student}},
			[]arrived{{2, 4, ArrivedAccepted, Student}, {1, 5, ArrivedIgnoredIdentity, Student}}},
		{"each delivery of one message is an arrival of its own",
			[]Command{queue(completion("run-1", "A")), deliver(1), deliver(1), queue(rejection("run-1", "no")), deliver(2)},
			map[string]uint64{"client": 0, "run-1": 0},
			[]sent{{"1", 1, 1, Student}, {"2", 1, 4, Student}},
			[]arrived{{1, 2, ArrivedAccepted, Student}, {1, 3, ArrivedIgnoredFinal, Student}, {2, 5, ArrivedIgnoredFinal, Student}}},
		{"deadlines: unresolved, then a late reply resolves, then one after the final",
			[]Command{queueDeadline(), queue(completion("run-1", "late")), deliver(1), deliver(1), deliver(2), deliver(1)},
			map[string]uint64{"client": 0, "run-1": 0},
			[]sent{{"1", 1, 1, Student}, {"2", 1, 2, Student}},
			[]arrived{{1, 3, ArrivedUnresolved, Student}, {1, 4, ArrivedUnresolved, Student}, {2, 5, ArrivedAccepted, Student}, {1, 6, ArrivedIgnoredFinal, Student}}},
		{"an older run's deadline is ignored as another identity",
			[]Command{queueDeadline(), start(), deliver(1)},
			map[string]uint64{"client": 0, "run-1": 0, "run-2": 2},
			[]sent{{"1", 1, 1, Student}},
			[]arrived{{1, 3, ArrivedIgnoredIdentity, Student}}},
		{"diagnostics",
			[]Command{queue(`{`), queue(numeric), deliver(1), deliver(2)},
			map[string]uint64{"client": 0, "run-1": 0},
			[]sent{{"1", 1, 1, Student}, {"2", 1, 2, Student}},
			[]arrived{{1, 3, ArrivedDiagnostic, Student}, {2, 4, ArrivedDiagnostic, Student}}},
		{"the instructor's messages: held, delivered at once, and delivered by the instructor",
			[]Command{injectReply(completion("run-1", "x"), false), start(), injectDeadline("run-1", true), byInstructor(deliver(1)), queue(completion("run-2", "y")), deliver(3)},
			map[string]uint64{"client": 0, "run-1": 0, "run-2": 2},
			[]sent{{"I1", 1, 1, Instructor}, {"I2", 2, 3, Instructor}, {"1", 2, 5, Student}},
			[]arrived{{2, 3, ArrivedIgnoredIdentity, Instructor}, {1, 4, ArrivedIgnoredIdentity, Instructor}, {3, 6, ArrivedAccepted, Student}}},
		{"renaming draws nothing but takes its tick",
			[]Command{{Kind: Rename, Name: " Ada "}, queue(completion("run-1", "A")), deliver(1)},
			map[string]uint64{"client": 0, "run-1": 0},
			[]sent{{"1", 1, 2, Student}},
			[]arrived{{1, 3, ArrivedAccepted, Student}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DiagramOfTrace(tc.trace, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got := laneStarts(d); !reflect.DeepEqual(got, tc.lanes) {
				t.Errorf("lanes %v, want %v", got, tc.lanes)
			}
			if got := sends(d); !reflect.DeepEqual(got, tc.sends) {
				t.Errorf("messages %+v, want %+v", got, tc.sends)
			}
			if got := arrivals(d); !reflect.DeepEqual(got, tc.arrivals) {
				t.Errorf("arrivals %+v, want %+v", got, tc.arrivals)
			}
			if d.End != uint64(len(tc.trace)) || d.Timed {
				t.Errorf("end %d timed %v, want %d untimed", d.End, d.Timed, len(tc.trace))
			}
			for i, l := range d.Lanes[1:] {
				if l.Name != runID(i+1) {
					t.Errorf("lane %d is %s", i+1, l.Name)
				}
			}
		})
	}
}

// seedTrace is the walkthrough's nine steps as one trace.
func seedTrace() []Command {
	var trace []Command
	for _, s := range seedSteps {
		trace = append(trace, s...)
	}
	return trace
}

// TestDiagramSeedWalkthrough: after the nine steps every message is drawn,
// every delivery is an arrival with the receipt's notice in the same
// order, and every outcome of the diagram occurs.
func TestDiagramSeedWalkthrough(t *testing.T) {
	t.Parallel()
	trace := seedTrace()
	d, err := DiagramOfTrace(trace, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := run(t, trace)
	v := l.View()
	if len(d.Messages) != v.Held || len(d.Arrivals) != v.Received || len(d.Lanes) != 1+l.runs {
		t.Fatalf("%d messages, %d arrivals, %d lanes; the session has %d held, %d receipts, %d runs",
			len(d.Messages), len(d.Arrivals), len(d.Lanes), v.Held, v.Received, l.runs)
	}
	seen := map[ArrivalOutcome]bool{}
	for i, a := range d.Arrivals {
		r := v.Receipts[i]
		if a.Message != r.Message || a.Notice != r.Notice || a.Kind != r.Kind || a.Why != r.Why {
			t.Errorf("arrival %d %+v, receipt %+v", i, a, r)
		}
		if i > 0 && a.Seq <= d.Arrivals[i-1].Seq {
			t.Errorf("arrival %d at seq %d, after %d", i, a.Seq, d.Arrivals[i-1].Seq)
		}
		if m := d.Messages[a.Message-1]; m.Seq > a.Seq || d.Lanes[m.Lane].Start > m.Seq {
			t.Errorf("message %d sent at %d from a lane started at %d, arrived at %d", m.ID, m.Seq, d.Lanes[m.Lane].Start, a.Seq)
		}
		if a.Outcome.Prediction() != ClassifyNotice(a.Notice) {
			t.Errorf("arrival %d: outcome %s for notice %q", i, a.Outcome, a.Notice)
		}
		seen[a.Outcome] = true
	}
	if len(seen) != NumArrivalOutcomes {
		t.Errorf("outcomes seen %v, want all %d", seen, NumArrivalOutcomes)
	}
	for i, m := range d.Messages {
		if want, _ := l.Message(i + 1); m.ID != i+1 || m.Label != want.Label() || m.Number != want.Number {
			t.Errorf("message %d %+v, held %+v", i+1, m, want)
		}
	}
}

// TestDiagramOfEventsIsTheTrace: a stored log (with times) draws the same
// diagram as the trace that made it, but for the times; drawing it one
// event at a time, each prefix is a prefix of the whole.
func TestDiagramOfEventsIsTheTrace(t *testing.T) {
	t.Parallel()
	trace := append(seedTrace(), injectReply(`<script>alert(1)</script>`, true), Command{Kind: Rename, Name: "Ada"})
	want, err := DiagramOfTrace(trace, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, events := run(t, trace)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	stored := make([]DiagramEvent, len(events))
	for i, e := range events {
		stored[i] = DiagramEvent{Seq: uint64(i + 1), At: t0.Add(time.Duration(i) * time.Second), Event: e}
	}
	got, err := DiagramOf(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Timed || got.Name != "Ada" || got.Arrivals[len(got.Arrivals)-1].At != t0.Add(time.Duration(len(events)-2)*time.Second) { // the injection delivered at once, before the rename
		t.Fatalf("timed %v name %q", got.Timed, got.Name)
	}
	if !reflect.DeepEqual(untimed(got), want) {
		t.Fatalf("the stored log's diagram differs from the trace's:\n%+v\n%+v", untimed(got), want)
	}
	b := NewDiagramBuilder()
	for i, e := range stored {
		if err := b.Add(e); err != nil {
			t.Fatal(err)
		}
		p := b.Diagram()
		if p.End != e.Seq || !isPrefix(p.Messages, got.Messages) || !isPrefix(p.Arrivals, got.Arrivals) || !isPrefix(p.Lanes, got.Lanes) {
			t.Fatalf("after event %d the diagram is not a prefix of the whole", i+1)
		}
	}
}

func isPrefix[T any](p, whole []T) bool {
	return len(p) == 0 || len(p) <= len(whole) && reflect.DeepEqual(p, whole[:len(p)])
}

// untimed is d without its times, in fresh slices.
func untimed(d Diagram) Diagram {
	d.Timed = false
	d.Lanes = append([]DiagramLane(nil), d.Lanes...)
	d.Messages = append([]DiagramMessage(nil), d.Messages...)
	d.Arrivals = append([]Arrival(nil), d.Arrivals...)
	for i := range d.Lanes {
		d.Lanes[i].StartAt = time.Time{}
	}
	for i := range d.Messages {
		d.Messages[i].At = time.Time{}
	}
	for i := range d.Arrivals {
		d.Arrivals[i].At = time.Time{}
	}
	return d
}

func TestDiagramRefusals(t *testing.T) {
	t.Parallel()
	b := NewDiagramBuilder()
	if err := b.Add(DiagramEvent{Seq: 2, Event: Event{Kind: RunStarted}}); err == nil || !strings.Contains(err.Error(), "want 1") {
		t.Fatalf("a gap in the seqs: %v", err)
	}
	if err := b.Add(DiagramEvent{Seq: 1, Event: Event{Kind: MessageDelivered, Message: Message{ID: 1}}}); err == nil {
		t.Fatal("a delivery of a message never queued was drawn")
	}
	if d := b.Diagram(); d.End != 0 || len(d.Lanes) != 2 || len(d.Arrivals) != 0 {
		t.Fatalf("a refused event changed the diagram: %+v", d)
	}
	if _, err := DiagramOfTrace([]Command{start(), deliver(3)}, Limits{}); err == nil || !strings.Contains(err.Error(), "step 2") {
		t.Fatalf("a trace's refused step: %v", err)
	}
	// The copy is the caller's: changing it leaves the builder's alone.
	b.Diagram().Lanes[0].Name = "changed"
	if b.Diagram().Lanes[0].Name != "client" {
		t.Fatal("Diagram shares its lanes")
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	want := map[string]ArrivalOutcome{
		NoticeInvalidJSON: ArrivedDiagnostic, NoticeInvalidReply: ArrivedDiagnostic,
		NoticeReplyOtherCall: ArrivedIgnoredIdentity, NoticeDeadlineOtherCall: ArrivedIgnoredIdentity,
		NoticeReplyAlreadyFinal: ArrivedIgnoredFinal, NoticeDeadlineFinal: ArrivedIgnoredFinal,
		NoticeAcceptedComplete: ArrivedAccepted, NoticeAcceptedReject: ArrivedAccepted,
		NoticeUnresolved: ArrivedUnresolved, NoticeStillUnresolved: ArrivedUnresolved,
	}
	for _, n := range DeliveryNotices() {
		o, ok := OutcomeOf(n)
		if w, known := want[n]; !ok || !known || o != w {
			t.Errorf("OutcomeOf(%q) = %s %v, want %s", n, o, ok, w)
		}
		if o.Prediction() != ClassifyNotice(n) {
			t.Errorf("%q: outcome %s bears out %s, the notice %s", n, o, o.Prediction(), ClassifyNotice(n))
		}
	}
	for _, n := range []string{NoticeReady, NoticeStarted, ""} {
		if _, ok := OutcomeOf(n); ok {
			t.Errorf("OutcomeOf(%q) is an outcome", n)
		}
	}
	if ArrivedIgnoredFinal.String() != "ignored: final already recorded" || ArrivalOutcome(99).String() != "arrivalOutcome(99)" {
		t.Error("outcome names")
	}
}

// TestDiagramReplyLeavesTheRunItNames: a reply leaves the lane of the run
// it names (run-1's stale answer queued during run-2 left run-1); a reply
// for no run of ours, for another call, or one that does not decode leaves
// the run current when it was queued; a deadline always does.
func TestDiagramReplyLeavesTheRunItNames(t *testing.T) {
	trace := []Command{
		start(), // run-2
		queue(reply("run-1", "completed", "output", "Old answer")),
		queue(reply("run-2", "completed", "output", "New answer")),
		queue(reply("run-9", "completed", "output", "Nobody's")),
		queue(`{"runId":"run-1","callId":"other","kind":"completed","output":"x"}`),
		queue(`{`),
		queueDeadline(),
	}
	d, err := DiagramOfTrace(trace, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 2, 2, 2, 2, 2}
	if len(d.Messages) != len(want) {
		t.Fatalf("%d messages, want %d", len(d.Messages), len(want))
	}
	for i, m := range d.Messages {
		if m.Lane != want[i] {
			t.Errorf("message %s leaves lane %d, want %d", m.Number, m.Lane, want[i])
		}
	}
}
