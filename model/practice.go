package model

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Practice that adapts to each student (docs/exercise.md, "Practice").
//
// Mastery is a fold over the session's deliveries with a prediction,
// practice or not: for each kind of message (DeliveryKind), how many
// predictions, how many right, the right ones in a row up to the latest
// (Streak), and Mastered once the last MasteryStreak were right.
//
// The next kind to practise (Lab.NextKind) is never a mastered kind; first
// the kinds whose latest prediction was wrong, the most recent first (a
// situation the latest code check shows wrong counts as a wrong prediction
// made when the program was submitted); then the kinds never predicted, in
// the order the nine steps meet them (PracticeKinds); then the rest by
// shortest streak, least recently practised first.
//
// A draw (DrawPractice, or an instructor's PracticePreset) is one event,
// PracticeDrawn, carrying what was drawn, why, and the ordinary changes it
// makes: a new run, a message queued and delivered at once (a completion,
// a deadline), then the message of the drawn kind, held. The event carries
// all of it, so a replay never draws again.

// MasteryStreak is how many right predictions in a row master a kind.
const MasteryStreak = 3

// KindMastery is one student's predictions about one kind of message.
type KindMastery struct {
	Predicted, Right int
	// Streak counts the right predictions in a row, up to the latest.
	Streak   int
	Mastered bool // the last MasteryStreak predictions were right
	// LastAt is the seq of the latest delivery with a prediction of the
	// kind, 0 for none; LastWrong says that prediction was wrong.
	LastAt    uint64
	LastWrong bool
	// wrong is the latest prediction's receipt (its index + 1) when it was
	// wrong, and run the run current when it was delivered: for Why.
	wrong int
	run   string
}

// Mastery is a student's KindMastery for every kind, indexed by DeliveryKind.
type Mastery [NumDeliveryKinds]KindMastery

// add counts receipt r (the index-th, from 1), delivered at seq while run
// was current, if it carries a prediction.
func (m *Mastery) add(seq uint64, r Receipt, index int, run string) {
	if r.Predicted == NoPrediction || r.Kind >= numDeliveryKinds {
		return
	}
	k := &m[r.Kind]
	k.Predicted++
	k.LastAt, k.LastWrong, k.wrong, k.run = seq, !r.Right, 0, run
	if r.Right {
		k.Right++
		k.Streak++
	} else {
		k.Streak, k.wrong = 0, index
	}
	k.Mastered = k.Streak >= MasteryStreak
}

// Count is how many kinds are mastered.
func (m Mastery) Count() int {
	n := 0
	for _, k := range m {
		if k.Mastered {
			n++
		}
	}
	return n
}

// All reports whether every kind is mastered.
func (m Mastery) All() bool { return m.Count() == NumDeliveryKinds }

// State names where a student stands with kind k, as the board and the
// grades say it: "mastered", "wrong" (the latest prediction was wrong),
// "learning" (predicted, the latest right, not yet mastered) or "new" (never
// predicted).
func (m Mastery) State(k DeliveryKind) string {
	switch km := m[k]; {
	case km.Mastered:
		return "mastered"
	case km.Predicted == 0:
		return "new"
	case km.LastWrong:
		return "wrong"
	}
	return "learning"
}

// MasteryOf replays events on a new session and returns its mastery: what
// an export or a grade computes from a stored log.
func MasteryOf(events []Event) (Mastery, error) {
	l, err := replay(events)
	if err != nil {
		return Mastery{}, err
	}
	return l.mastery, nil
}

// Mastery returns the session's predictions by kind.
func (l *Lab) Mastery() Mastery { return l.mastery }

// practiceKinds are the kinds in the order the nine steps meet them: a
// matching reply (2), a stale reply (3), the final outcome again and
// contradicted (4), a deadline and a late reply (5, 6), an older run's
// deadline (7), another callId, not JSON, the wrong shape (8).
var practiceKinds = [NumDeliveryKinds]DeliveryKind{
	KindMatchingReply, KindStaleReply, KindDuplicate, KindContradictory, KindDeadline,
	KindLateReply, KindStaleDeadline, KindWrongCallID, KindMalformedJSON, KindWrongShape,
}

// PracticeKinds lists every kind in the order the nine steps meet them:
// the order of the state frame's mastery and of the page's row.
func PracticeKinds() []DeliveryKind { return append([]DeliveryKind(nil), practiceKinds[:]...) }

// ParseDeliveryKind reads a kind's name ("staleReply").
func ParseDeliveryKind(name string) (DeliveryKind, bool) {
	for k := DeliveryKind(0); k < numDeliveryKinds; k++ {
		if deliveryKindNames[k] == name {
			return k, true
		}
	}
	return 0, false
}

// Practice is what a draw did (the PracticeDrawn event): the kind drawn
// and why, and the changes that set the call up for it, in order: a new
// run (NewRun), a message queued and delivered at once (Setup, ID 0 for
// none), then Message, held. Both messages are the lab's (Lab), from the
// actor who asked.
type Practice struct {
	Kind    DeliveryKind
	Why     string
	NewRun  bool
	Setup   Message
	Message Message
}

// PracticeView is the practice drawn and not yet delivered: its message
// (id and number), kind and why; Message 0 when none. Done says every kind
// is mastered (and nothing is drawn).
type PracticeView struct {
	Message int
	Number  string
	Kind    DeliveryKind
	Why     string
	Done    bool
}

// Practice returns the practice drawn and not yet delivered, or Done.
func (l *Lab) Practice() PracticeView {
	if l.practice.Message == 0 && l.mastery.All() {
		return PracticeView{Done: true}
	}
	return l.practice
}

// ErrPredictionRequired refuses a delivery without a prediction of the
// practice drawn: a practice is predicted first.
var ErrPredictionRequired = errors.New("a prediction is required")

// ErrAllMastered refuses a draw once every kind is mastered.
var ErrAllMastered = fmt.Errorf("%w: every kind of message is mastered; nothing is left to practise", ErrPresetNotApplicable)

// errPracticeDelivered refuses the practice preset delivered at once: a
// practice is predicted first, by the student.
var errPracticeDelivered = fmt.Errorf("%w: a practice is held for the student to predict; it cannot be delivered at once", ErrPresetNotApplicable)

// situationKinds maps the code check's situations (search.go) to the kinds
// of message they involve, with what a program shown wrong there does, for
// Why. A new run involves no delivery.
var situationKinds = map[string]struct {
	kinds []DeliveryKind
	does  string
}{
	"completion":          {[]DeliveryKind{KindMatchingReply}, "your module does not record a completion for the current run as the lab does"},
	"rejection":           {[]DeliveryKind{KindMatchingReply}, "your module does not record a rejection for the current run as the lab does"},
	"olderRun":            {[]DeliveryKind{KindStaleReply}, "your module lets a reply for an older run change the call"},
	"otherCallId":         {[]DeliveryKind{KindWrongCallID}, "your module lets a reply for another call id change the call"},
	"spaces":              {[]DeliveryKind{KindStaleReply, KindWrongCallID}, "your module takes identifiers that differ only by spaces for the call's own"},
	"sameKindAgain":       {[]DeliveryKind{KindDuplicate, KindContradictory}, "your module lets a second final reply of the same kind change the outcome"},
	"oppositeKind":        {[]DeliveryKind{KindContradictory}, "your module lets a final reply of the opposite kind change the outcome"},
	"replayed":            {[]DeliveryKind{KindDuplicate}, "your module treats a message delivered again differently from the first time"},
	"deadlinePending":     {[]DeliveryKind{KindDeadline}, "your module does not make a Pending call Unresolved at its deadline"},
	"deadlineAfterResult": {[]DeliveryKind{KindDeadline}, "your module lets a deadline overwrite a result"},
	"lateReply":           {[]DeliveryKind{KindLateReply}, "your module does not let a late reply resolve an Unresolved call"},
	"repeatedDeadline":    {[]DeliveryKind{KindDeadline}, "your module does not keep a call Unresolved at a repeated deadline"},
	"olderDeadline":       {[]DeliveryKind{KindStaleDeadline}, "your module lets an older run's deadline change the call"},
	"malformedJson":       {[]DeliveryKind{KindMalformedJSON}, "your module does not answer text that is not JSON with a diagnostic"},
	"wrongShape":          {[]DeliveryKind{KindWrongShape}, "your module does not answer JSON of the wrong shape with a diagnostic"},
	"emptyOutput":         {[]DeliveryKind{KindMatchingReply}, "your module does not take an empty output for a completion"},
	"markup":              {[]DeliveryKind{KindMatchingReply}, "your module does not keep markup in an output as text"},
	"newRun":              {},
}

// codeWrong says, per kind, what the check's first situation shown wrong
// that involves it says ("" for none).
func codeWrong(code *Result) (out [NumDeliveryKinds]string) {
	if code == nil {
		return out
	}
	for _, s := range code.Coverage {
		if s.Passed {
			continue
		}
		for _, k := range situationKinds[s.ID].kinds {
			if out[k] == "" {
				out[k] = situationKinds[s.ID].does
			}
		}
	}
	return out
}

// NextKind is the kind a practice would draw now, with why, given the
// session's latest code check (nil for none); false once every kind is
// mastered.
func (l *Lab) NextKind(code *Result) (DeliveryKind, string, bool) {
	type candidate struct {
		kind     DeliveryKind
		group    int    // 0: the latest wrong; 1: never predicted; 2: the rest
		wrongAt  uint64 // group 0: when it was last wrong
		order    int    // its place in practiceKinds
		fromCode string // group 0: the code check's sentence, when it is the latest wrong
	}
	wrongInCode := codeWrong(code)
	var cands []candidate
	for i, k := range practiceKinds {
		m := l.mastery[k]
		if m.Mastered {
			continue
		}
		c := candidate{kind: k, group: 2, order: i}
		if m.LastWrong {
			c.group, c.wrongAt = 0, m.LastAt
		}
		if wrongInCode[k] != "" && l.codeAt > m.LastAt {
			c.group, c.wrongAt, c.fromCode = 0, l.codeAt, wrongInCode[k]
		}
		if c.group == 2 && m.Predicted == 0 {
			c.group = 1
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return 0, "", false
	}
	best := slices.MinFunc(cands, func(a, b candidate) int {
		if a.group != b.group {
			return a.group - b.group
		}
		ma, mb := l.mastery[a.kind], l.mastery[b.kind]
		switch {
		case a.group == 0 && a.wrongAt != b.wrongAt:
			return cmpDesc(a.wrongAt, b.wrongAt)
		case a.group == 2 && ma.Streak != mb.Streak:
			return ma.Streak - mb.Streak
		case a.group == 2 && ma.LastAt != mb.LastAt:
			return -cmpDesc(ma.LastAt, mb.LastAt)
		}
		return a.order - b.order
	})
	m := l.mastery[best.kind]
	switch {
	case best.fromCode != "":
		return best.kind, "Your last code check shows that " + best.fromCode + ".", true
	case best.group == 0:
		return best.kind, l.wrongWhy(best.kind, m), true
	case best.group == 1:
		return best.kind, "You have not predicted " + best.kind.Phrase() + " yet.", true
	}
	return best.kind, "You have predicted " + best.kind.Phrase() + " right " + times(m.Streak) + " in a row; " +
		strconv.Itoa(MasteryStreak) + " in a row master it.", true
}

// cmpDesc orders a before b when a is larger.
func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return strconv.Itoa(n) + " times"
}

// wrongWhy says what the student expected of kind k at its latest, wrong,
// prediction: "You expected run-1's reply to be accepted after run-2 began
// (message 3)."
func (l *Lab) wrongWhy(k DeliveryKind, m KindMastery) string {
	if m.wrong < 1 || m.wrong > len(l.receipts) {
		return "Your latest prediction about " + k.Phrase() + " was wrong."
	}
	r := l.receipts[m.wrong-1]
	subject, after := k.Phrase(), ""
	msg, _ := l.Message(r.Message)
	switch k {
	case KindStaleReply:
		if pr := l.decoded(msg.ID); pr.err == nil {
			subject = pr.reply.Key.RunID + "'s reply"
		}
		after = " after " + m.run + " began"
	case KindStaleDeadline:
		subject, after = msg.Key.RunID+"'s deadline", " after "+m.run+" began"
	case KindDeadline:
		subject = m.run + "'s own deadline"
	case KindDuplicate:
		subject = "the final reply delivered again"
	case KindContradictory:
		after = " once the call had its final outcome"
	case KindLateReply:
		subject = "a reply after the deadline"
	case KindWrongCallID:
		subject = "a reply for another call id"
	case KindMalformedJSON:
		subject = "text that is not JSON"
	case KindWrongShape:
		subject = "JSON of the wrong shape"
	}
	return "You expected " + subject + " " + expectedTo[r.Predicted] + after + " (message " + r.Number + ")."
}

// decidePractice draws the next kind for by, sets the call up for it and
// holds a message of it, built from the session's own history as the
// presets are.
func (l *Lab) decidePractice(by Actor, code *Result, lim Limits) (Event, error) {
	if l.practice.Message != 0 {
		return Event{}, fmt.Errorf("%w: a practice is already held: deliver message %s first", ErrPresetNotApplicable, l.practice.Number)
	}
	kind, why, ok := l.NextKind(code)
	if !ok {
		return Event{}, ErrAllMastered
	}
	p := l.planPractice(kind, by)
	p.Why = why
	n, bytes := 1, len(p.Message.Raw)
	if p.Setup.ID != 0 {
		n, bytes = 2, bytes+len(p.Setup.Raw)
		if len(l.receipts) >= lim.MaxReceipts {
			return Event{}, &LimitError{Cap: "receipts", Max: lim.MaxReceipts}
		}
	}
	switch {
	case len(l.queue)+n > lim.MaxHeld:
		return Event{}, &LimitError{Cap: "held messages", Max: lim.MaxHeld}
	case l.heldBytes+bytes > lim.MaxHeldBytes:
		return Event{}, &LimitError{Cap: "held text in bytes", Max: lim.MaxHeldBytes}
	}
	return Event{Kind: PracticeDrawn, By: by, Message: Message{ID: p.Message.ID}, Practice: &p}, nil
}

// planPractice works out the changes that make kind apply and the message
// of that kind: the call as it will be after a new run (when the kind needs
// an older run, a Pending call, or a call not yet final), after a message
// delivered (a completion, to have a final outcome; a deadline, to make the
// call Unresolved), then the message itself.
func (l *Lab) planPractice(kind DeliveryKind, by Actor) Practice {
	p := Practice{Kind: kind}
	runs, call, accepted := l.runs, l.call, l.accepted
	id := len(l.queue) + 1
	newRun := func() {
		p.NewRun = true
		runs++
		call, accepted = Begin(runID(runs), CallID), 0
	}
	setup := func(m Message) {
		m.ID, m.From, m.Lab = id, by, true
		id++
		d := Explain(call, m)
		if !call.Status.Final() && d.Call.Status.Final() {
			accepted = m.ID
		}
		p.Setup, call = m, d.Call
	}
	reply := func(key Key, kind, field, text string) Message {
		return Message{Kind: ReplyMessage, Raw: replyJSON(key, kind, field, text)}
	}
	older := func() Key { return Key{RunID: runID(runs - 1), CallID: CallID} }
	var m Message
	switch kind {
	case KindMatchingReply:
		if call.Status != Pending {
			newRun()
		}
		m = Message{Kind: ReplyMessage, Raw: Draft(call.Key)}
	case KindStaleReply:
		if runs < 2 {
			newRun()
		}
		if raw, ok := l.heldCompletionBefore(runs); ok {
			m = Message{Kind: ReplyMessage, Raw: raw}
		} else {
			m = reply(older(), "completed", "output", "Stale answer for "+older().RunID)
		}
	case KindDuplicate, KindContradictory:
		if !call.Status.Final() {
			setup(Message{Kind: ReplyMessage, Raw: Draft(call.Key)})
		}
		switch {
		case kind == KindContradictory && call.Status == Completed:
			m = reply(call.Key, "rejected", "reason", "Contradictory rejection for "+call.Key.RunID)
		case kind == KindContradictory:
			m = reply(call.Key, "completed", "output", "Contradictory completion for "+call.Key.RunID)
		case accepted == p.Setup.ID:
			m = Message{Kind: ReplyMessage, Raw: p.Setup.Raw}
		default:
			m = Message{Kind: ReplyMessage, Raw: l.queue[accepted-1].Raw}
		}
	case KindWrongCallID:
		m = reply(Key{RunID: call.Key.RunID, CallID: WrongCallIDValue}, "completed", "output", "Answer for "+call.Key.RunID)
	case KindMalformedJSON:
		d := Draft(call.Key)
		m = Message{Kind: ReplyMessage, Raw: d[:len(d)-1]}
	case KindWrongShape:
		m = Message{Kind: ReplyMessage, Raw: string(append(appendKey(nil, call.Key), `,"kind":"completed","output":42}`...))}
	case KindDeadline:
		m = Message{Kind: DeadlineMessage, Key: call.Key}
	case KindLateReply:
		if call.Status.Final() {
			newRun()
		}
		if call.Status == Pending {
			setup(Message{Kind: DeadlineMessage, Key: call.Key})
		}
		m = Message{Kind: ReplyMessage, Raw: Draft(call.Key)}
	case KindStaleDeadline:
		if runs < 2 {
			newRun()
		}
		m = Message{Kind: DeadlineMessage, Key: older()}
	}
	m.ID, m.From, m.Lab = id, by, true
	p.Message = m
	return p
}

// heldCompletionBefore finds the newest held completion for a run before
// run-runs of this call: an older run's own reply.
func (l *Lab) heldCompletionBefore(runs int) (string, bool) {
	for i := len(l.queue) - 1; i >= 0; i-- {
		m := l.queue[i]
		if m.Kind != ReplyMessage {
			continue
		}
		pr := l.decoded(m.ID)
		if r, err := pr.reply, pr.err; err == nil && r.Outcome == Completion && r.Key.CallID == CallID && earlierRun(r.Key.RunID, runs) {
			return m.Raw, true
		}
	}
	return "", false
}

// nextPractice works out a PracticeDrawn event: its new run, its set-up
// message delivered at once, its message held, and the practice pending.
// It checks what Decide made, so that a corrupt log changes nothing.
func (l *Lab) nextPractice(c *change, seq uint64, e Event) error {
	p := e.Practice
	switch {
	case p == nil:
		return errors.New("a practice event without its practice")
	case p.Kind >= numDeliveryKinds:
		return fmt.Errorf("a practice of unknown kind %d", p.Kind)
	case l.practice.Message != 0:
		return fmt.Errorf("a practice drawn while message %d is one", l.practice.Message)
	}
	if p.NewRun {
		c.startRun()
	}
	id := len(l.queue) + 1
	numbered := l.numbered
	hold := func(m Message) (Message, parsedReply, error) {
		if m.ID != id {
			return Message{}, parsedReply{}, fmt.Errorf("practice message id %d, want %d", m.ID, id)
		}
		if m.Kind != ReplyMessage && m.Kind != DeadlineMessage {
			return Message{}, parsedReply{}, fmt.Errorf("unknown message kind %d", m.Kind)
		}
		id++
		m.Lab = true
		numbered[numbering(m.From)]++
		m.Number = messageNumber(m.From, numbered[numbering(m.From)])
		pr := parseNow(m)
		kept := pr
		if len(m.Raw) > parseKeptBytes {
			kept = parsedReply{}
		}
		return m, kept, nil
	}
	if p.Setup.ID != 0 {
		m, pr, err := hold(p.Setup)
		if err != nil {
			return err
		}
		c.setup = &heldSetup{m, pr}
		c.deliver(seq, m, parseNow(m), e.By, NoPrediction)
	}
	m, pr, err := hold(p.Message)
	if err != nil {
		return err
	}
	c.queued, c.parsed = m, pr
	c.practice = PracticeView{Message: m.ID, Number: m.Number, Kind: p.Kind, Why: p.Why}
	return nil
}
