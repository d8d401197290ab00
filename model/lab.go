package model

import (
	"errors"
	"fmt"
	"strconv"
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
	ReplyMessage    MessageKind = iota // a raw reply string, kept as-is; only a delivery acts on what it says
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
	// Number is how the page numbers the message: the student's own
	// messages "1", "2", … in the order queued, the instructor's "I1", "I2",
	// …, so that an injection never shifts the walkthrough's "deliver
	// message 2". ID stays the protocol's id. Apply assigns Number from the
	// queue, whatever an event's copy says, so a stored log need not keep it.
	Number string
	// Lab says the lab made the message for a practice (practice.go): the
	// set-up's message or the one drawn. Like an instructor's message, it
	// never ticks a step: the student did not make the case.
	Lab bool
}

// messageNumber is the Number of the n-th message (from 1) queued by from.
func messageNumber(from Actor, n int) string {
	if from == Instructor {
		return "I" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// numbering is the index of from's count in Lab.numbered.
func numbering(from Actor) int {
	if from == Instructor {
		return 1
	}
	return 0
}

// Label is how the queue shows the message.
func (m Message) Label() string {
	if m.Kind == DeadlineMessage {
		return "Deadline for " + m.Key.RunID + "/" + m.Key.CallID
	}
	return m.Raw
}

// Receipt records one delivery, in arrival order. Everything in it is
// decided when the delivery is applied, so a replay gives the same text.
type Receipt struct {
	Message int
	Notice  string // the seed's notice, verbatim
	By      Actor  // who delivered it
	Number  string // the message's Number ("2", "I1")
	From    Actor  // who queued the message
	Why     string // the notice explained in terms of the call (see Explain)
	Kind    DeliveryKind
	// Predicted is what the deliverer said the notice would be, NoPrediction
	// if nothing; Right says whether ClassifyNotice(Notice) agrees.
	Predicted Prediction
	Right     bool
	// Practice says the message delivered was the practice drawn
	// (practice.go), which the delivery ends.
	Practice bool
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
	Rename // set the session's display name
	Inject // an instructor's message: held, or held and delivered at once
	// SubmitCode submits a student's ToolCall module (Source) for the code
	// check of campaign Seed, which the server chooses (code.go).
	SubmitCode
	// AddCase adds an instructor's own case (Case) to the session's suite.
	AddCase
	// RemoveCase removes the instructor's case named Case.Name.
	RemoveCase
	// DrawPractice draws the next kind to practise, sets the call up for
	// it and holds one message of it (practice.go); Code is the session's
	// latest check, if any.
	DrawPractice
)

// Command is one request to change a session.
type Command struct {
	Kind    CommandKind
	By      Actor
	Raw     string     // QueueReply
	Message int        // Deliver
	Predict Prediction // Deliver: optional, NoPrediction for none
	Name    string     // Rename: as typed; Decide normalizes it
	Inject  Injection  // Inject
	Source  string     // SubmitCode: the module's text
	Lang    Language   // SubmitCode: the language Source is written in
	Seed    uint64     // SubmitCode: the campaign's seed, below 2^53
	Case    *Case      // AddCase (a pointer: Commands compare with ==)
	// Code is the check of the session's latest submission, nil if none
	// has ended: the situations it shows wrong join the choice of a
	// practice's kind (DrawPractice, or Inject with PracticePreset). The
	// server carries it; the event records what was drawn, so a replay
	// needs no result.
	Code *Result
}

// Injection is what an instructor injects: a preset, resolved against the
// session's own history when the command is decided, or a free-form reply
// (Kind ReplyMessage, Raw) or deadline (Kind DeadlineMessage, Key).
type Injection struct {
	Preset  Preset // NoPreset for a free-form message
	Kind    MessageKind
	Raw     string
	Key     Key
	Deliver bool // deliver now, in the same event, rather than hold
}

// EventKind names a change that happened to a session.
type EventKind uint8

const (
	RunStarted EventKind = iota
	MessageQueued
	MessageDelivered
	Renamed         // the display name changed
	MessageInjected // an instructor's message joined the queue, and was delivered at once if Deliver
	CodeSubmitted   // a module was submitted for the code check: Source and Seed
	CaseAdded       // an instructor's case joined the session's suite: Case
	CaseRemoved     // an instructor's case left the session's suite: Case (its name only)
	PracticeDrawn   // a practice was drawn: its set-up and its held message (Practice)
)

// Event is one change, as stored and replayed: applying a session's events in
// order rebuilds its state, so an event carries everything it needs (a queued
// message with its id and captured identity, a normalized name).
type Event struct {
	Kind       EventKind
	By         Actor
	Message    Message    // MessageQueued, MessageInjected: the message; MessageDelivered, PracticeDrawn: only its ID
	Name       string     // Renamed: the new name, already normalized
	Deliver    bool       // MessageInjected: delivered in the same event
	Prediction Prediction // MessageDelivered: what the student expected, NoPrediction if nothing
	Source     string     // CodeSubmitted: the module's text, as submitted
	Lang       Language   // CodeSubmitted: the language Source is written in
	Seed       uint64     // CodeSubmitted: the campaign's seed
	Case       *Case      // CaseAdded: the case, validated; CaseRemoved: its name (a pointer: Events compare with ==)
	Practice   *Practice  // PracticeDrawn: what was drawn, why, and the changes it makes
}

// Lab is one student's lab session: the current call, the run counter, the
// held queue and the receipts. Its zero value is not ready; use NewLab.
type Lab struct {
	seq    uint64
	runs   int
	call   Call
	notice string
	queue  []Message // by ID: queue[i].ID == i+1
	// parsed is, by ID like queue, each held message's reply decoded when
	// it was queued, so that a delivery does not decode it again; a reply
	// over parseKeptBytes is not kept (kept false) and is decoded again.
	parsed    []parsedReply
	heldBytes int
	receipts  []Receipt
	name      string
	draft     string // Draft(call.Key): the call changes only at a run's start
	// accepted is the id of the message whose delivery recorded the current
	// call's final outcome, 0 while it has none: the duplicate preset
	// resends exactly that text.
	accepted int
	// numbered counts the held messages queued by each actor, for Number.
	numbered [2]int
	exercise Exercise
	// predicted and right count deliveries with a prediction, and those
	// whose prediction the notice bore out.
	predicted, right int
	// delivered says, by message id-1, whether the message was ever
	// delivered; waiting counts the held messages that never were.
	delivered []bool
	waiting   int
	// code is what the code check of the latest submission is a function
	// of (code.go); codeAt is the seq of that submission, 0 for none.
	code   CodeInput
	codeAt uint64
	// mastery is the predictions by kind (practice.go); practice is the
	// practice drawn and not yet delivered (Message 0: none).
	mastery Mastery
	// shown is a copy of mastery as of its last change, which views share
	// read-only (nil before the first prediction): a view is made at every
	// change, and mastery changes only with a prediction.
	shown    *Mastery
	practice PracticeView
}

// NewLab returns a session at run-1, as the page starts.
func NewLab() *Lab {
	call := Begin(runID(1), CallID)
	return &Lab{runs: 1, call: call, notice: NoticeReady, draft: Draft(call.Key)}
}

func runID(n int) string { return "run-" + strconv.Itoa(n) }

// Seq counts the changes applied; it only grows.
func (l *Lab) Seq() uint64 { return l.seq }

// decoded returns held message id's reply decoded: as kept when it was
// queued, or decoded again (a reply over parseKeptBytes).
func (l *Lab) decoded(id int) parsedReply {
	if pr := l.parsed[id-1]; pr.kept {
		return pr
	}
	return parseNow(l.queue[id-1])
}

// Message returns held message id.
func (l *Lab) Message(id int) (Message, bool) {
	if id < 1 || id > len(l.queue) {
		return Message{}, false
	}
	return l.queue[id-1], true
}

// Call returns the current call.
func (l *Lab) Call() Call { return l.call }

// Exercise returns the session's progress through the nine checkpoints.
func (l *Lab) Exercise() Exercise { return l.exercise }

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
		m.Number = l.nextNumber(m.From)
		if err := l.canHold(m, lim); err != nil {
			return Event{}, err
		}
		return Event{Kind: MessageQueued, By: cmd.By, Message: m}, nil
	case Deliver:
		if cmd.Message < 1 || cmd.Message > len(l.queue) {
			return Event{}, fmt.Errorf("%w %d", ErrUnknownMessage, cmd.Message)
		}
		if cmd.Predict >= numPredictions {
			return Event{}, fmt.Errorf("%w %d", ErrUnknownPrediction, cmd.Predict)
		}
		if len(l.receipts) >= lim.MaxReceipts {
			return Event{}, &LimitError{Cap: "receipts", Max: lim.MaxReceipts}
		}
		if cmd.Message == l.practice.Message && cmd.Predict == NoPrediction {
			return Event{}, fmt.Errorf("%w: message %s is a practice; say what you expect first", ErrPredictionRequired, l.practice.Number)
		}
		return Event{Kind: MessageDelivered, By: cmd.By, Message: Message{ID: cmd.Message}, Prediction: cmd.Predict}, nil
	case Rename:
		name, err := NormalizeName(cmd.Name)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: Renamed, By: cmd.By, Name: name}, nil
	case Inject:
		return l.decideInjection(cmd, lim)
	case SubmitCode, AddCase, RemoveCase:
		return l.decideCode(cmd)
	case DrawPractice:
		return l.decidePractice(cmd.By, cmd.Code, lim)
	}
	return Event{}, fmt.Errorf("unknown command kind %d", cmd.Kind)
}

// decideInjection resolves a preset against the session and checks every cap
// the event will meet, so that a refused injection changes nothing and an
// accepted one is whole: held, and delivered too when asked.
func (l *Lab) decideInjection(cmd Command, lim Limits) (Event, error) {
	in := cmd.Inject
	if in.Preset == PracticePreset {
		if in.Deliver {
			return Event{}, errPracticeDelivered
		}
		return l.decidePractice(cmd.By, cmd.Code, lim)
	}
	if in.Preset != NoPreset {
		resolved, err := l.Preset(in.Preset)
		if err != nil {
			return Event{}, err
		}
		resolved.Deliver = in.Deliver
		in = resolved
	}
	m := Message{ID: len(l.queue) + 1, Kind: in.Kind, From: cmd.By, Number: l.nextNumber(cmd.By)}
	switch in.Kind {
	case ReplyMessage:
		m.Raw = in.Raw
	case DeadlineMessage:
		m.Key = in.Key
	default:
		return Event{}, fmt.Errorf("unknown message kind %d", in.Kind)
	}
	if err := l.canHold(m, lim); err != nil {
		return Event{}, err
	}
	if in.Deliver && len(l.receipts) >= lim.MaxReceipts {
		return Event{}, &LimitError{Cap: "receipts", Max: lim.MaxReceipts}
	}
	return Event{Kind: MessageInjected, By: cmd.By, Message: m, Deliver: in.Deliver}, nil
}

// nextNumber is the Number of the next message from queues.
func (l *Lab) nextNumber(from Actor) string {
	return messageNumber(from, l.numbered[numbering(from)]+1)
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
	c, err := l.next(e)
	if err != nil {
		return "", err
	}
	l.commit(c)
	return l.notice, nil
}

// commit makes c, worked out by next at the current seq, the session's.
func (l *Lab) commit(c change) {
	l.runs, l.call, l.notice, l.accepted, l.name = c.runs, c.call, c.notice, c.accepted, c.name
	l.exercise, l.draft, l.code, l.codeAt, l.practice = c.exercise, c.draft, c.code, c.codeAt, c.practice
	if c.setup != nil {
		l.hold(c.setup.m, c.setup.parsed)
	}
	if c.queued.ID != 0 {
		l.hold(c.queued, c.parsed)
	}
	if r := &c.receipt; r.Message != 0 {
		l.receipts = append(l.receipts, *r)
		if !l.delivered[r.Message-1] {
			l.delivered[r.Message-1] = true
			l.waiting--
		}
		if r.Predicted != NoPrediction {
			l.predicted++
			if r.Right {
				l.right++
			}
			l.mastery.add(l.seq+1, *r, len(l.receipts), c.receiptRun)
			shown := l.mastery
			l.shown = &shown
		}
	}
	l.seq++
}

// hold appends m, decoded as pr, to the queue.
func (l *Lab) hold(m Message, pr parsedReply) {
	l.queue = append(l.queue, m)
	l.parsed = append(l.parsed, pr)
	l.delivered = append(l.delivered, false)
	l.waiting++
	l.heldBytes += len(m.Raw)
	l.numbered[numbering(m.From)]++
}

// Change is an event's effect, worked out by Prepare against the session as
// it is: the server learns its notice and run, stores them with the event,
// then Commit applies it without working it out again (a delivery parses
// and explains its reply once). It holds only at the seq it was prepared at.
type Change struct {
	prepared bool
	seq      uint64
	c        change
}

// Notice is the notice the change leaves.
func (ch Change) Notice() string { return ch.c.notice }

// Run is the run current after the change.
func (ch Change) Run() string { return ch.c.call.Key.RunID }

// Prepare works out what applying e would do, without changing the
// session. An event Apply would refuse is refused here too.
func (l *Lab) Prepare(e Event) (Change, error) {
	c, err := l.next(e)
	if err != nil {
		return Change{}, err
	}
	return Change{prepared: true, seq: l.seq, c: c}, nil
}

// Commit applies a change Prepare made at the session's current seq, as
// Apply would apply its event.
func (l *Lab) Commit(ch Change) error {
	if !ch.prepared || ch.seq != l.seq {
		return fmt.Errorf("committing a change prepared at seq %d at seq %d", ch.seq, l.seq)
	}
	l.commit(ch.c)
	return nil
}

// Preview returns what applying e would leave, without changing the session:
// the notice and the run that is current afterwards.
func (l *Lab) Preview(e Event) (notice, run string, err error) {
	ch, err := l.Prepare(e)
	return ch.Notice(), ch.Run(), err
}

// change is what an event does to a session: its new scalar fields and what
// it appends. Computing it reads the session and changes nothing, so Preview
// costs no copy of the queue or the receipts.
type change struct {
	runs     int
	call     Call
	notice   string
	accepted int
	name     string
	exercise Exercise
	draft    string      // Draft(call.Key), worked out once per run
	queued   Message     // appended to the queue when its ID is not 0
	parsed   parsedReply // queued's reply, decoded, kept when short (Lab.parsed)
	receipt  Receipt     // appended to the receipts when its Message is not 0
	code     CodeInput
	codeAt   uint64
	// receiptRun is the run current when receipt's message was delivered.
	receiptRun string
	// setup is a practice's set-up message (queued and delivered at
	// once), appended before queued; nil for none. A pointer: every
	// change is copied whole, and few are practices.
	setup    *heldSetup
	practice PracticeView
}

// heldSetup is a practice's set-up message and its reply, decoded.
type heldSetup struct {
	m      Message
	parsed parsedReply
}

func (l *Lab) next(e Event) (change, error) {
	c := change{runs: l.runs, call: l.call, notice: l.notice, accepted: l.accepted, name: l.name, exercise: l.exercise, draft: l.draft, code: l.code,
		codeAt: l.codeAt, practice: l.practice}
	seq := l.seq + 1 // the seq this event will have
	if e.By == Student && e.Kind != Renamed && e.Kind != MessageInjected {
		c.exercise.acted(seq)
	}
	switch e.Kind {
	case RunStarted:
		c.startRun()
	case MessageQueued, MessageInjected:
		if e.Message.ID != len(l.queue)+1 {
			return change{}, fmt.Errorf("queued message id %d, want %d", e.Message.ID, len(l.queue)+1)
		}
		m := e.Message
		m.Number = l.nextNumber(m.From)
		pr := parseNow(m)
		c.queued = m
		if len(m.Raw) <= parseKeptBytes {
			c.parsed = pr
		}
		if e.Kind == MessageQueued && e.By == Student {
			c.exercise.queued(seq, c.call, m, pr)
		}
		if e.Kind == MessageInjected && e.Deliver {
			c.deliver(seq, m, pr, e.By, NoPrediction)
		}
	case MessageDelivered:
		m, ok := l.Message(e.Message.ID)
		if !ok {
			return change{}, fmt.Errorf("%w %d", ErrUnknownMessage, e.Message.ID)
		}
		if e.Prediction >= numPredictions {
			return change{}, fmt.Errorf("%w %d", ErrUnknownPrediction, e.Prediction)
		}
		c.deliver(seq, m, l.decoded(m.ID), e.By, e.Prediction)
	case Renamed:
		c.name = e.Name
	case CodeSubmitted, CaseAdded, CaseRemoved:
		c.code = l.code.next(e)
		if e.Kind == CodeSubmitted {
			c.codeAt = seq
		}
	case PracticeDrawn:
		if err := l.nextPractice(&c, seq, e); err != nil {
			return change{}, err
		}
	default:
		return change{}, fmt.Errorf("unknown event kind %d", e.Kind)
	}
	return c, nil
}

// startRun begins the next run.
func (c *change) startRun() {
	c.runs++
	c.call = Begin(runID(c.runs), CallID)
	c.draft = Draft(c.call.Key)
	c.notice = NoticeStarted
	c.accepted = 0
	c.exercise.runStarted()
}

// deliver applies m to the current call and records the receipt; the first
// final reply of a run remembers which message brought it. Delivering the
// practice drawn ends it.
func (c *change) deliver(seq uint64, m Message, pr parsedReply, by Actor, p Prediction) {
	d := explain(c.call, m, pr)
	if !c.call.Status.Final() && d.Call.Status.Final() {
		c.accepted = m.ID
	}
	c.receiptRun = c.call.Key.RunID
	drawn := c.practice.Message != 0 && c.practice.Message == m.ID
	if drawn {
		c.practice = PracticeView{}
	}
	c.exercise.delivered(seq, by, c.runs, c.call, m, d)
	c.call, c.notice = d.Call, d.Notice
	c.receipt = Receipt{
		Message: m.ID, Notice: d.Notice, By: by, Number: m.Number, From: m.From,
		Why: d.Why, Kind: d.Kind, Predicted: p, Right: p != NoPrediction && ClassifyNotice(d.Notice) == p,
		Practice: drawn,
	}
}

// MessageView is a held message as the page lists it.
type MessageView struct {
	ID     int
	Kind   string
	From   string
	Label  string
	Number string // "1", "2", … for the student's messages, "I1", … for the instructor's
}

// LabView is the whole state a client renders.
type LabView struct {
	Seq      uint64
	Call     CallView
	Notice   string
	Draft    string
	Queue    []MessageView // from ViewSince: only the messages after the first held
	Receipts []Receipt     // from ViewSince: only the receipts after the first receipts
	Name     string        // the student's display name, "" when unset
	Held     int           // held messages in all
	Waiting  int           // held messages never delivered
	Received int           // receipts in all
	Exercise Exercise      // the nine checkpoints
	// Predicted and Right count the deliveries with a prediction and those
	// the notice bore out.
	Predicted, Right int
	// Mastery is the predictions by kind, nil before the first (shared:
	// read it, never write it); Practice the practice drawn and not yet
	// delivered, or Done once every kind is mastered (practice.go).
	Mastery  *Mastery
	Practice PracticeView
}

// View presents the session. The slices are fresh copies.
func (l *Lab) View() LabView { return l.ViewSince(0, 0) }

// ViewSince is View with only the held messages and receipts added after an
// earlier view that had held and received of them. Both lists only grow and
// their entries never change, so a client of the model can keep what it has
// already presented and take only what is new.
func (l *Lab) ViewSince(held, received int) LabView {
	held, received = min(max(held, 0), len(l.queue)), min(max(received, 0), len(l.receipts))
	v := LabView{
		Seq:       l.seq,
		Call:      l.call.View(),
		Notice:    l.notice,
		Draft:     l.draft,
		Queue:     make([]MessageView, 0, len(l.queue)-held),
		Receipts:  append([]Receipt(nil), l.receipts[received:]...),
		Name:      l.name,
		Held:      len(l.queue),
		Waiting:   l.waiting,
		Received:  len(l.receipts),
		Exercise:  l.exercise,
		Predicted: l.predicted,
		Right:     l.right,
		Mastery:   l.shown,
		Practice:  l.Practice(),
	}
	for _, m := range l.queue[held:] {
		v.Queue = append(v.Queue, MessageView{ID: m.ID, Kind: m.Kind.String(), From: m.From.String(), Label: m.Label(), Number: m.Number})
	}
	return v
}

// Draft is the default completion for key, as the seed's JSON.stringify
// writes it: keys in the order runId, callId, kind, output.
func Draft(key Key) string {
	return replyJSON(key, "completed", "output", "Answer for "+key.RunID)
}
