// Package model holds the lab's rules: the tool-call state machine of the seed
// (Pending, Completed, Rejected, Unresolved), its reply decoder and notices, and
// the lab session built on it (runs, held messages, deliveries, receipts).
//
// It is pure: no I/O, no goroutines, no clock. Every text a student reads comes
// from here, verbatim from the seed.
package model

import (
	"errors"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// Key identifies one call: runId names the run and callId a call within it.
// Both must match exactly; every run uses the same callId, so callId alone would
// accept an older run's reply.
type Key struct {
	RunID  string
	CallID string
}

// Status is one of the four states a call can be in.
type Status uint8

const (
	Pending    Status = iota // waiting for a final reply
	Completed                // an explicit completion arrived; the call's text is its output
	Rejected                 // an explicit rejection arrived; the call's text is its reason
	Unresolved               // a local deadline passed without a final reply
)

var statusNames = [...]string{"Pending", "Completed", "Rejected", "Unresolved"}

func (s Status) String() string { return statusNames[s] }

// Final reports whether the status records a final reply, which nothing changes.
func (s Status) Final() bool { return s == Completed || s == Rejected }

// Call is what the client knows about one call. Text is the output of a
// Completed call and the reason of a Rejected one; an empty string is still a
// valid output, so the status, never the text, says which state we are in.
type Call struct {
	Key    Key
	Status Status
	Text   string
}

// Outcome says which final reply a reply is.
type Outcome uint8

const (
	Completion Outcome = iota
	Rejection
)

// Reply is a decoded final reply.
type Reply struct {
	Key     Key
	Outcome Outcome
	Text    string // the output of a completion, the reason of a rejection
}

// Update is the result of a transition: the call after it and the notice that
// explains it.
type Update struct {
	Call   Call
	Notice string
}

// The notices and texts of the seed, verbatim.
const (
	NoticeReady             = "Ready. Queue a reply or a local deadline observation."
	NoticeStarted           = "Started a new run. Older messages remain queued."
	NoticeInvalidJSON       = "Invalid JSON: could not parse message."
	NoticeInvalidReply      = "Invalid reply: expected string identifiers and a completed output or rejected reason."
	NoticeReplyOtherCall    = "Ignored reply: different call identity."
	NoticeReplyAlreadyFinal = "Ignored reply: final outcome already recorded."
	NoticeAcceptedComplete  = "Accepted completion."
	NoticeAcceptedReject    = "Accepted rejection."
	NoticeDeadlineOtherCall = "Ignored deadline: different call identity."
	NoticeUnresolved        = "Unresolved: deadline observed without a final reply."
	NoticeStillUnresolved   = "Still unresolved: no final reply."
	NoticeDeadlineFinal     = "Ignored deadline: final outcome already recorded."
	UnresolvedDetail        = "No final reply observed. A matching late reply can still resolve this call."
)

// DeliveryNotices returns the notices a delivery can leave: each bears out
// one of the four predictions (ClassifyNotice), and no other notice does.
func DeliveryNotices() []string {
	return []string{
		NoticeInvalidJSON, NoticeInvalidReply, NoticeReplyOtherCall, NoticeReplyAlreadyFinal,
		NoticeAcceptedComplete, NoticeAcceptedReject, NoticeDeadlineOtherCall,
		NoticeUnresolved, NoticeStillUnresolved, NoticeDeadlineFinal,
	}
}

// The two diagnostics of the reply decoder. Neither is a tool rejection.
// Their texts are the seed's notices, which Receive shows as they are.
var (
	//lint:ignore ST1005 the text is the seed's notice, shown to students verbatim
	ErrInvalidJSON = errors.New(NoticeInvalidJSON)
	//lint:ignore ST1005 the text is the seed's notice, shown to students verbatim
	ErrInvalidReply = errors.New(NoticeInvalidReply)
)

// Begin returns a new Pending call.
func Begin(runID, callID string) Call {
	return Call{Key: Key{RunID: runID, CallID: callID}, Status: Pending}
}

// ParseReply decodes raw as the seed does with JSON.parse and its decode:
// an object with string runId and callId, and kind "completed" with a string
// output or kind "rejected" with a string reason. Extra fields are ignored;
// empty strings are valid; nothing is trimmed or coerced.
func ParseReply(raw string) (Reply, error) {
	v, err := jsjson.Parse(raw)
	if err != nil {
		return Reply{}, ErrInvalidJSON
	}
	if v.Kind != jsjson.Object {
		return Reply{}, ErrInvalidReply
	}
	runID, okRun := v.String("runId")
	callID, okCall := v.String("callId")
	kind, okKind := v.String("kind")
	if !okRun || !okCall || !okKind {
		return Reply{}, ErrInvalidReply
	}
	key := Key{RunID: runID, CallID: callID}
	switch kind {
	case "completed":
		if output, ok := v.String("output"); ok {
			return Reply{Key: key, Outcome: Completion, Text: output}, nil
		}
	case "rejected":
		if reason, ok := v.String("reason"); ok {
			return Reply{Key: key, Outcome: Rejection, Text: reason}, nil
		}
	}
	return Reply{}, ErrInvalidReply
}

// parsedReply is a held message's reply as ParseReply decodes it (a
// deadline has none); kept says it was worked out (Lab.parsed).
type parsedReply struct {
	reply Reply
	err   error
	kept  bool
}

// parseKeptBytes bounds the replies a session keeps decoded beside their
// text: a longer one is decoded again at each delivery, so the decoded
// copies of a session's held text stay under 256 KiB at the default
// MaxHeld.
const parseKeptBytes = 1 << 10

// parseNow decodes m's reply.
func parseNow(m Message) parsedReply {
	if m.Kind != ReplyMessage {
		return parsedReply{kept: true}
	}
	r, err := ParseReply(m.Raw)
	return parsedReply{reply: r, err: err, kept: true}
}

// Accept applies a decoded reply: only a reply for the same key moves the call,
// and the first accepted final reply wins.
func Accept(c Call, r Reply) Update {
	switch {
	case c.Key != r.Key:
		return Update{Call: c, Notice: NoticeReplyOtherCall}
	case c.Status.Final():
		return Update{Call: c, Notice: NoticeReplyAlreadyFinal}
	case r.Outcome == Completion:
		return Update{Call: Call{Key: c.Key, Status: Completed, Text: r.Text}, Notice: NoticeAcceptedComplete}
	default:
		return Update{Call: Call{Key: c.Key, Status: Rejected, Text: r.Text}, Notice: NoticeAcceptedReject}
	}
}

// Receive parses raw and applies it; a diagnostic leaves the call unchanged.
func Receive(c Call, raw string) Update {
	r, err := ParseReply(raw)
	if err != nil {
		return Update{Call: c, Notice: err.Error()}
	}
	return Accept(c, r)
}

// Expire applies a local deadline observed for key. Only a Pending call with
// the same key becomes Unresolved; a deadline never erases a final reply.
func Expire(c Call, key Key) Update {
	switch {
	case c.Key != key:
		return Update{Call: c, Notice: NoticeDeadlineOtherCall}
	case c.Status == Pending:
		return Update{Call: Call{Key: c.Key, Status: Unresolved}, Notice: NoticeUnresolved}
	case c.Status == Unresolved:
		return Update{Call: c, Notice: NoticeStillUnresolved}
	default:
		return Update{Call: c, Notice: NoticeDeadlineFinal}
	}
}

// CallView is what the page shows of a call.
type CallView struct {
	RunID  string
	CallID string
	Status string
	Detail string // output, reason, the uncertainty text, or "" while Pending
}

// View presents a call; every status is handled here so that no client
// repeats the switch.
func (c Call) View() CallView {
	v := CallView{RunID: c.Key.RunID, CallID: c.Key.CallID, Status: c.Status.String()}
	switch c.Status {
	case Completed, Rejected:
		v.Detail = c.Text
	case Unresolved:
		v.Detail = UnresolvedDetail
	}
	return v
}
