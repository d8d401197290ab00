package model

import (
	"fmt"
	"time"
)

// The session diagram: a space-time picture of a session, one lane for the
// client (the student's page) and one per run, each held message drawn
// leaving the lane of the run it answers (the run a well-formed reply names,
// else the run current when it was queued) and
// arriving on the client's lane each time it was delivered. It is a fold
// of the session's events through a Lab, so a live session, a replay, an
// export and a checker's trace (DiagramOfTrace) give the same value.

// DiagramEvent is one stored change as the diagram reads it: the server
// fills it from a store record. The notice and run a record keeps are not
// needed: the fold works them out again, as a replay does.
type DiagramEvent struct {
	// Seq is the event's place on the time axis: the session's seq after
	// it (1, 2, 3, …), or a trace's step.
	Seq   uint64
	At    time.Time // when it was stored; zero in a trace
	Event Event
}

// ClientLane is the index of the client's lane in Diagram.Lanes; run-k's
// lane is Lanes[k].
const ClientLane = 0

// Diagram is a session drawn as lanes and messages. Every slice is in time
// order, and a diagram of a longer log only appends to them, so a live
// view can draw what is new.
type Diagram struct {
	Lanes    []DiagramLane
	Messages []DiagramMessage // by id: Messages[i].ID == i+1
	Arrivals []Arrival        // every delivery, in the order delivered
	// End is the Seq of the last event (0 for none): the time axis runs
	// from 0, where the client and run-1 begin, to End.
	End uint64
	// Timed says the At fields hold times (a stored log); a trace has none.
	Timed bool
	Name  string // the session's display name, "" when unset
}

// DiagramLane is the client or one run.
type DiagramLane struct {
	Name    string    // "client", "run-1", "run-2", …
	Start   uint64    // the Seq of the event that started it; 0 for the client and run-1
	StartAt time.Time // zero for the client and run-1
	By      Actor     // who started the run
}

// DiagramMessage is one held message, sent from its run's lane when it was
// queued.
type DiagramMessage struct {
	ID     int
	Number string // as the page numbers it: "1", "2", … the student's, "I1", … the instructor's
	Kind   MessageKind
	From   Actor  // who queued it
	Label  string // Message.Label: the reply's raw text, or "Deadline for run-1/lookup"
	Lane   int    // the lane it leaves: the run a reply names, else the run current when it was queued
	Seq    uint64
	At     time.Time
}

// Arrival is one delivery of a message to the client.
type Arrival struct {
	Message int // the DiagramMessage's ID
	Seq     uint64
	At      time.Time
	By      Actor  // who delivered it
	Run     string // the run current when it arrived
	Outcome ArrivalOutcome
	Notice  string       // the seed's notice, verbatim
	Why     string       // the notice in terms of the call (Explain)
	Kind    DeliveryKind // what the message was to the call it met
	// Predicted is what the deliverer expected, NoPrediction if nothing;
	// Right says whether the notice bore it out.
	Predicted Prediction
	Right     bool
}

// ArrivalOutcome is what a delivery did, as the diagram marks it: the four
// predictions, with "ignored" told apart by why.
type ArrivalOutcome uint8

const (
	ArrivedAccepted        ArrivalOutcome = iota // a final reply recorded
	ArrivedIgnoredIdentity                       // for another run or call id
	ArrivedIgnoredFinal                          // the call already had its final outcome
	ArrivedUnresolved                            // a deadline observed without a final reply
	ArrivedDiagnostic                            // not JSON, or not a reply
	numArrivalOutcomes
)

// NumArrivalOutcomes is how many ArrivalOutcomes there are.
const NumArrivalOutcomes = int(numArrivalOutcomes)

var arrivalOutcomeNames = [...]string{
	ArrivedAccepted:        "accepted",
	ArrivedIgnoredIdentity: "ignored: different identity",
	ArrivedIgnoredFinal:    "ignored: final already recorded",
	ArrivedUnresolved:      "unresolved",
	ArrivedDiagnostic:      "diagnostic",
}

// String is the outcome in words: "ignored: different identity".
func (o ArrivalOutcome) String() string {
	if o < numArrivalOutcomes {
		return arrivalOutcomeNames[o]
	}
	return fmt.Sprintf("arrivalOutcome(%d)", uint8(o))
}

// Prediction is the prediction the outcome bears out.
func (o ArrivalOutcome) Prediction() Prediction {
	switch o {
	case ArrivedAccepted:
		return PredictAccepted
	case ArrivedIgnoredIdentity, ArrivedIgnoredFinal:
		return PredictIgnored
	case ArrivedUnresolved:
		return PredictUnresolved
	case ArrivedDiagnostic:
		return PredictDiagnostic
	}
	return NoPrediction
}

// OutcomeOf says what a delivery's notice means for the diagram; false for
// a notice no delivery leaves.
func OutcomeOf(notice string) (ArrivalOutcome, bool) {
	switch notice {
	case NoticeReplyOtherCall, NoticeDeadlineOtherCall:
		return ArrivedIgnoredIdentity, true
	case NoticeReplyAlreadyFinal, NoticeDeadlineFinal:
		return ArrivedIgnoredFinal, true
	}
	switch ClassifyNotice(notice) {
	case PredictAccepted:
		return ArrivedAccepted, true
	case PredictUnresolved:
		return ArrivedUnresolved, true
	case PredictDiagnostic:
		return ArrivedDiagnostic, true
	}
	return 0, false
}

// DiagramBuilder folds a session's events into its diagram, one at a time,
// as they are stored. Its zero value is not ready; use NewDiagramBuilder.
type DiagramBuilder struct {
	lab *Lab
	d   Diagram
}

// replyLane is the lane a queued reply leaves: the run it names when it
// is a well-formed reply for one of the session's runs so far (a stale
// reply for run-1 queued during run-2 left run-1), else current, the run
// current when it was queued (a reply that names no run of ours, or that
// does not decode, belongs to no other).
func replyLane(pr parsedReply, current int) int {
	if pr.err != nil || pr.reply.Key.CallID != CallID {
		return current
	}
	for k := 1; k <= current; k++ {
		if pr.reply.Key.RunID == runID(k) {
			return k
		}
	}
	return current
}

// NewDiagramBuilder starts the diagram of a new session: the client's lane
// and run-1's.
func NewDiagramBuilder() *DiagramBuilder {
	return &DiagramBuilder{lab: NewLab(), d: Diagram{
		Lanes: []DiagramLane{{Name: "client"}, {Name: runID(1)}},
	}}
}

// Add applies the session's next event. Seqs must follow on (1, 2, 3, …):
// a gap means a lost event, and the diagram would show a session that
// never was. A refused event changes nothing.
func (b *DiagramBuilder) Add(e DiagramEvent) error {
	if want := b.d.End + 1; e.Seq != want {
		return fmt.Errorf("diagram: event at seq %d, want %d", e.Seq, want)
	}
	ev := e.Event
	lane := b.lab.runs // the run current before the event: the one a queued message leaves
	receipts := len(b.lab.receipts)
	if _, err := b.lab.Apply(ev); err != nil {
		return fmt.Errorf("diagram: seq %d: %w", e.Seq, err)
	}
	d := &b.d
	d.End = e.Seq
	if !e.At.IsZero() {
		d.Timed = true
	}
	switch ev.Kind {
	case RunStarted:
		d.Lanes = append(d.Lanes, DiagramLane{Name: b.lab.call.Key.RunID, Start: e.Seq, StartAt: e.At, By: ev.By})
	case MessageQueued, MessageInjected:
		m := b.lab.queue[ev.Message.ID-1]
		if m.Kind == ReplyMessage {
			lane = replyLane(b.lab.decoded(m.ID), lane)
		}
		d.Messages = append(d.Messages, DiagramMessage{
			ID: m.ID, Number: m.Number, Kind: m.Kind, From: m.From, Label: m.Label(), Lane: lane, Seq: e.Seq, At: e.At,
		})
	case Renamed:
		d.Name = b.lab.name
	}
	if len(b.lab.receipts) > receipts {
		r := b.lab.receipts[len(b.lab.receipts)-1]
		o, _ := OutcomeOf(r.Notice) // every receipt's notice is a delivery's
		d.Arrivals = append(d.Arrivals, Arrival{
			Message: r.Message, Seq: e.Seq, At: e.At, By: r.By, Run: b.lab.call.Key.RunID, Outcome: o,
			Notice: r.Notice, Why: r.Why, Kind: r.Kind, Predicted: r.Predicted, Right: r.Right,
		})
	}
	return nil
}

// Diagram returns the diagram so far. The slices are fresh copies.
func (b *DiagramBuilder) Diagram() Diagram {
	d := b.d
	d.Lanes = append([]DiagramLane(nil), d.Lanes...)
	d.Messages = append([]DiagramMessage(nil), d.Messages...)
	d.Arrivals = append([]Arrival(nil), d.Arrivals...)
	return d
}

// DiagramOf draws a session from its stored events, in seq order.
func DiagramOf(events []DiagramEvent) (Diagram, error) {
	b := NewDiagramBuilder()
	for _, e := range events {
		if err := b.Add(e); err != nil {
			return Diagram{}, err
		}
	}
	return b.Diagram(), nil
}

// DiagramOfTrace draws a trace: commands (a checker's client frames, as
// the server decodes them) played on a new session under lim, each step a
// tick of the time axis. A refused step is an error that names it, since a
// trace that cannot be played has no picture.
func DiagramOfTrace(trace []Command, lim Limits) (Diagram, error) {
	b := NewDiagramBuilder()
	for i, cmd := range trace {
		ev, err := b.lab.Decide(cmd, lim)
		if err != nil {
			return Diagram{}, fmt.Errorf("diagram: step %d: %w", i+1, err)
		}
		if err := b.Add(DiagramEvent{Seq: uint64(i + 1), Event: ev}); err != nil {
			return Diagram{}, err
		}
	}
	return b.Diagram(), nil
}
