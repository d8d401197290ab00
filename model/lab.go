package model

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// CallID is the call identity every run of the lab uses, so that only the
// runId tells an older run's reply apart.
const CallID = "lookup"

// Actor says who caused a change or held a message.
type Actor uint8

const (
	Student Actor = iota
	Instructor
)

func (a Actor) String() string {
	if a == Instructor {
		return "instructor"
	}
	return "student"
}

// MessageKind says what a held message carries.
type MessageKind uint8

const (
	ReplyMessage    MessageKind = iota // a raw reply string, parsed only when delivered
	DeadlineMessage                    // a deadline observation for the identity captured when queued
)

func (k MessageKind) String() string {
	if k == DeadlineMessage {
		return "deadline"
	}
	return "reply"
}

// Message is a held message. A reply keeps its raw text exactly as queued; a
// deadline keeps the identity that was current when it was queued.
type Message struct {
	ID   int
	Kind MessageKind
	From Actor
	Raw  string // ReplyMessage only
	Key  Key    // DeadlineMessage only
}

// Label is how the queue shows the message.
func (m Message) Label() string {
	if m.Kind == DeadlineMessage {
		return "Deadline for " + m.Key.RunID + "/" + m.Key.CallID
	}
	return m.Raw
}

// deliver applies the message to the call that is current now.
func (m Message) deliver(c Call) Update {
	if m.Kind == DeadlineMessage {
		return Expire(c, m.Key)
	}
	return Receive(c, m.Raw)
}

// Receipt records one delivery, in arrival order.
type Receipt struct {
	Message int
	Notice  string
	By      Actor
}

// Limits bound what one session may hold. Zero fields take the defaults.
type Limits struct {
	MaxReplyBytes int // bytes of one queued reply
	MaxHeld       int // held messages
	MaxHeldBytes  int // bytes of all held reply text
	MaxReceipts   int // deliveries recorded
}

// DefaultLimits are the protocol's defaults.
func DefaultLimits() Limits {
	return Limits{MaxReplyBytes: 64 << 10, MaxHeld: 256, MaxHeldBytes: 1 << 20, MaxReceipts: 1024}
}

// WithDefaults fills zero fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxReplyBytes <= 0 {
		l.MaxReplyBytes = d.MaxReplyBytes
	}
	if l.MaxHeld <= 0 {
		l.MaxHeld = d.MaxHeld
	}
	if l.MaxHeldBytes <= 0 {
		l.MaxHeldBytes = d.MaxHeldBytes
	}
	if l.MaxReceipts <= 0 {
		l.MaxReceipts = d.MaxReceipts
	}
	return l
}

// LimitError refuses a command that would pass a cap; it names the cap.
type LimitError struct {
	Cap string // e.g. "held messages"
	Max int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s limit reached (at most %d)", e.Cap, e.Max)
}

// ErrUnknownMessage refuses a delivery of a message id that was never queued.
var ErrUnknownMessage = errors.New("unknown message id")

// CommandKind names what a client asks of its session.
type CommandKind uint8

const (
	StartRun CommandKind = iota
	QueueReply
	QueueDeadline
	Deliver
)

// Command is one request to change a session.
type Command struct {
	Kind    CommandKind
	By      Actor
	Raw     string // QueueReply
	Message int    // Deliver
}

// EventKind names a change that happened to a session.
type EventKind uint8

const (
	RunStarted EventKind = iota
	MessageQueued
	MessageDelivered
)

// Event is one change, as stored and replayed: applying a session's events in
// order rebuilds its state, so an event carries everything it needs (a queued
// message with its id and captured identity).
type Event struct {
	Kind    EventKind
	By      Actor
	Message Message // MessageQueued: the message; MessageDelivered: only its ID
}

// Lab is one student's lab session: the current call, the run counter, the
// held queue and the receipts. Its zero value is not ready; use NewLab.
type Lab struct {
	seq       uint64
	runs      int
	call      Call
	notice    string
	queue     []Message // by ID: queue[i].ID == i+1
	heldBytes int
	receipts  []Receipt
}

// NewLab returns a session at run-1, as the page starts.
func NewLab() *Lab {
	return &Lab{runs: 1, call: Begin(runID(1), CallID), notice: NoticeReady}
}

func runID(n int) string { return "run-" + strconv.Itoa(n) }

// Seq counts the changes applied; it only grows.
func (l *Lab) Seq() uint64 { return l.seq }

// Call returns the current call.
func (l *Lab) Call() Call { return l.call }

// Decide validates a command against the session and its limits and returns
// the event it causes, without changing anything. A refused command changes
// nothing.
func (l *Lab) Decide(cmd Command, lim Limits) (Event, error) {
	lim = lim.WithDefaults()
	switch cmd.Kind {
	case StartRun:
		return Event{Kind: RunStarted, By: cmd.By}, nil
	case QueueReply, QueueDeadline:
		m := Message{ID: len(l.queue) + 1, Kind: ReplyMessage, From: cmd.By, Raw: cmd.Raw}
		if cmd.Kind == QueueDeadline {
			m = Message{ID: m.ID, Kind: DeadlineMessage, From: cmd.By, Key: l.call.Key}
		}
		if err := l.canHold(m, lim); err != nil {
			return Event{}, err
		}
		return Event{Kind: MessageQueued, By: cmd.By, Message: m}, nil
	case Deliver:
		if cmd.Message < 1 || cmd.Message > len(l.queue) {
			return Event{}, fmt.Errorf("%w %d", ErrUnknownMessage, cmd.Message)
		}
		if len(l.receipts) >= lim.MaxReceipts {
			return Event{}, &LimitError{Cap: "receipts", Max: lim.MaxReceipts}
		}
		return Event{Kind: MessageDelivered, By: cmd.By, Message: Message{ID: cmd.Message}}, nil
	}
	return Event{}, fmt.Errorf("unknown command kind %d", cmd.Kind)
}

func (l *Lab) canHold(m Message, lim Limits) error {
	switch {
	case len(m.Raw) > lim.MaxReplyBytes:
		return &LimitError{Cap: "reply size in bytes", Max: lim.MaxReplyBytes}
	case len(l.queue) >= lim.MaxHeld:
		return &LimitError{Cap: "held messages", Max: lim.MaxHeld}
	case l.heldBytes+len(m.Raw) > lim.MaxHeldBytes:
		return &LimitError{Cap: "held text in bytes", Max: lim.MaxHeldBytes}
	}
	return nil
}

// Apply performs an event and returns the notice it leaves. It never refuses:
// events were validated by Decide when they happened, and replay must rebuild
// the same state whatever the limits are now. An event that does not fit the
// session (a corrupt log) is an error and changes nothing.
func (l *Lab) Apply(e Event) (string, error) {
	switch e.Kind {
	case RunStarted:
		l.runs++
		l.call = Begin(runID(l.runs), CallID)
		l.notice = NoticeStarted
	case MessageQueued:
		if e.Message.ID != len(l.queue)+1 {
			return "", fmt.Errorf("queued message id %d, want %d", e.Message.ID, len(l.queue)+1)
		}
		l.queue = append(l.queue, e.Message)
		l.heldBytes += len(e.Message.Raw)
	case MessageDelivered:
		id := e.Message.ID
		if id < 1 || id > len(l.queue) {
			return "", fmt.Errorf("%w %d", ErrUnknownMessage, id)
		}
		u := l.queue[id-1].deliver(l.call)
		l.call = u.Call
		l.notice = u.Notice
		l.receipts = append(l.receipts, Receipt{Message: id, Notice: u.Notice, By: e.By})
	default:
		return "", fmt.Errorf("unknown event kind %d", e.Kind)
	}
	l.seq++
	return l.notice, nil
}

// MessageView is a held message as the page lists it.
type MessageView struct {
	ID    int
	Kind  string
	From  string
	Label string
}

// LabView is the whole state a client renders.
type LabView struct {
	Seq      uint64
	Call     CallView
	Notice   string
	Draft    string
	Queue    []MessageView
	Receipts []Receipt
}

// View presents the session. The slices are fresh copies.
func (l *Lab) View() LabView {
	v := LabView{
		Seq:      l.seq,
		Call:     l.call.View(),
		Notice:   l.notice,
		Draft:    Draft(l.call.Key),
		Queue:    make([]MessageView, len(l.queue)),
		Receipts: append([]Receipt(nil), l.receipts...),
	}
	for i, m := range l.queue {
		v.Queue[i] = MessageView{ID: m.ID, Kind: m.Kind.String(), From: m.From.String(), Label: m.Label()}
	}
	return v
}

// Draft is the default completion for key, as the seed's JSON.stringify
// writes it: keys in the order runId, callId, kind, output.
func Draft(key Key) string {
	b := make([]byte, 0, 96)
	b = append(b, `{"runId":`...)
	b = jsjson.AppendString(b, key.RunID)
	b = append(b, `,"callId":`...)
	b = jsjson.AppendString(b, key.CallID)
	b = append(b, `,"kind":"completed","output":`...)
	b = jsjson.AppendString(b, "Answer for "+key.RunID)
	b = append(b, '}')
	return string(b)
}
