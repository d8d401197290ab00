package model

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// DeliveryKind says what a delivered message was to the call it met: the
// kinds of message a class's predictions are counted by ("7 of 20 expected
// a stale reply to be accepted"). Exactly one applies to every delivery,
// decided in this order:
//
//   - a deadline for the current call's identity: KindDeadline (whatever the
//     call's status); a deadline for any other identity: KindStaleDeadline;
//   - a reply that is not JSON: MalformedJSON; JSON that is not a reply
//     (see ParseReply): WrongShape;
//   - a reply whose callId is not the call's: WrongCallID (whatever its
//     runId); one whose runId is not the call's: KindStaleReply (any other run,
//     older or not);
//   - a reply for the call once it has a final outcome: Duplicate when it is
//     the same kind with the same text as that outcome, Contradictory
//     otherwise (another text, or the opposite kind);
//   - a reply for the call while Unresolved: KindLateReply; while Pending:
//     KindMatchingReply.
type DeliveryKind uint8

const (
	KindMatchingReply DeliveryKind = iota // a reply for the current, Pending call
	KindStaleReply                        // a reply for another run of the same callId
	KindDuplicate                         // the final outcome again: same kind, same text
	KindContradictory                     // another final reply once the call has one: another text or the opposite kind
	KindWrongCallID                       // a reply whose callId is not the call's
	KindMalformedJSON                     // not JSON
	KindWrongShape                        // JSON, but not a reply
	KindDeadline                          // a deadline for the current call
	KindLateReply                         // a reply for the current call while it is Unresolved
	KindStaleDeadline                     // a deadline captured for another call (an older run's)
	numDeliveryKinds
)

// NumDeliveryKinds is how many DeliveryKinds there are, for arrays indexed by kind.
const NumDeliveryKinds = int(numDeliveryKinds)

var deliveryKindNames = [...]string{
	KindMatchingReply: "matchingReply",
	KindStaleReply:    "staleReply",
	KindDuplicate:     "duplicate",
	KindContradictory: "contradictory",
	KindWrongCallID:   "wrongCallId",
	KindMalformedJSON: "malformedJson",
	KindWrongShape:    "wrongShape",
	KindDeadline:      "deadline",
	KindLateReply:     "lateReply",
	KindStaleDeadline: "staleDeadline",
}

var deliveryKindPhrases = [...]string{
	KindMatchingReply: "a matching reply",
	KindStaleReply:    "a stale reply",
	KindDuplicate:     "a duplicate",
	KindContradictory: "a contradictory reply",
	KindWrongCallID:   "a reply with the wrong call id",
	KindMalformedJSON: "malformed JSON",
	KindWrongShape:    "a reply of the wrong shape",
	KindDeadline:      "a deadline",
	KindLateReply:     "a late reply",
	KindStaleDeadline: "an older run's deadline",
}

// String is the kind's name in frames and exports ("staleReply").
func (k DeliveryKind) String() string {
	if k < numDeliveryKinds {
		return deliveryKindNames[k]
	}
	return "deliveryKind(" + strconv.Itoa(int(k)) + ")"
}

// Phrase names the kind in a sentence: "7 of 20 expected " + Phrase() + " to be accepted".
func (k DeliveryKind) Phrase() string {
	if k < numDeliveryKinds {
		return deliveryKindPhrases[k]
	}
	return k.String()
}

// Prediction is what a student expects a delivery's notice to be, said
// before delivering. NoPrediction means none was made.
type Prediction uint8

const (
	NoPrediction      Prediction = iota
	PredictAccepted              // the notice begins "Accepted"
	PredictIgnored               // the notice begins "Ignored"
	PredictUnresolved            // the notice begins "Unresolved" or "Still unresolved"
	PredictDiagnostic            // the notice begins "Invalid"
	numPredictions
)

// NumPredictions is how many Predictions there are (NoPrediction included),
// for arrays indexed by prediction.
const NumPredictions = int(numPredictions)

var predictionNames = [...]string{"", "accepted", "ignored", "unresolved", "diagnostic"}

// String is the prediction's word in frames and exports; "" for NoPrediction.
func (p Prediction) String() string {
	if p < numPredictions {
		return predictionNames[p]
	}
	return "prediction(" + strconv.Itoa(int(p)) + ")"
}

// ParsePrediction reads a prediction's word: "accepted", "ignored",
// "unresolved" or "diagnostic". "" is NoPrediction; anything else is false.
func ParsePrediction(word string) (Prediction, bool) {
	for p := NoPrediction; p < numPredictions; p++ {
		if predictionNames[p] == word {
			return p, true
		}
	}
	return NoPrediction, false
}

// ErrUnknownPrediction refuses a delivery whose prediction is not one of the four.
var ErrUnknownPrediction = errors.New("unknown prediction")

// ClassifyNotice says which of the four predictions a delivery's notice
// bears out, by how it begins; NoPrediction for a notice no delivery gives.
func ClassifyNotice(notice string) Prediction {
	switch {
	case strings.HasPrefix(notice, "Accepted"):
		return PredictAccepted
	case strings.HasPrefix(notice, "Ignored"):
		return PredictIgnored
	case strings.HasPrefix(notice, "Unresolved"), strings.HasPrefix(notice, "Still unresolved"):
		return PredictUnresolved
	case strings.HasPrefix(notice, "Invalid"):
		return PredictDiagnostic
	}
	return NoPrediction
}

// Delivery is everything one delivery decides: the call after it with the
// seed's notice, why in terms of the call, and what kind of message it was.
type Delivery struct {
	Update
	Why  string
	Kind DeliveryKind
	// Reply is the decoded reply; OK is false for a deadline or a diagnostic.
	Reply Reply
	OK    bool
}

// Explain delivers m to c, as Receive and Expire do, and says why the result
// is what it is. The Why texts:
//
//   - another identity: "this reply is for run-1; the current call is
//     run-2/lookup" (the reply's runId/callId in full when its callId
//     differs), and likewise "this deadline is for …";
//   - a final outcome already there: "the call already has its final
//     outcome: New answer" (a rejection's: "rejected: <reason>"; an empty
//     output: "an empty output");
//   - not JSON: "not valid JSON at position 1: expected a string or "}",
//     found the end of the text", the position counted as JavaScript does;
//   - not a reply: "valid JSON but not a reply: output is a number, not a
//     string";
//   - accepted, a first deadline, a repeated one: what it did to the call.
func Explain(c Call, m Message) Delivery {
	return explain(c, m, parseNow(m))
}

// explain is Explain with m's reply already decoded (pr).
func explain(c Call, m Message, pr parsedReply) Delivery {
	if m.Kind == DeadlineMessage {
		d := Delivery{Update: Expire(c, m.Key), Kind: KindDeadline}
		switch {
		case c.Key != m.Key:
			d.Kind = KindStaleDeadline
			d.Why = "this deadline is for " + otherKey(m.Key, c.Key) + "; the current call is " + keyText(c.Key)
		case c.Status == Pending:
			d.Why = "no final reply for " + keyText(c.Key) + " before its deadline; a matching late reply can still resolve it"
		case c.Status == Unresolved:
			d.Why = keyText(c.Key) + " is already Unresolved; another deadline changes nothing"
		default:
			d.Why = finalWhy(c)
		}
		return d
	}
	r, err := pr.reply, pr.err
	if err != nil {
		d := Delivery{Update: Update{Call: c, Notice: err.Error()}, Kind: KindMalformedJSON}
		if errors.Is(err, ErrInvalidJSON) {
			d.Why = syntaxWhy(m.Raw)
		} else {
			d.Kind, d.Why = KindWrongShape, shapeWhy(m.Raw)
		}
		return d
	}
	d := Delivery{Update: Accept(c, r), Reply: r, OK: true}
	switch {
	case r.Key.CallID != c.Key.CallID:
		d.Kind = KindWrongCallID
		d.Why = "this reply is for " + otherKey(r.Key, c.Key) + "; the current call is " + keyText(c.Key)
	case r.Key.RunID != c.Key.RunID:
		d.Kind = KindStaleReply
		d.Why = "this reply is for " + otherKey(r.Key, c.Key) + "; the current call is " + keyText(c.Key)
	case c.Status.Final():
		d.Kind = KindContradictory
		d.Why = finalWhy(c)
		if sameOutcome(c, r) {
			// Said in words: a student (or a teacher's deliver-now) sees
			// the same notice as for a contradiction otherwise.
			d.Kind = KindDuplicate
			d.Why = "a duplicate of the final reply: " + d.Why
		}
	case c.Status == Unresolved:
		d.Kind = KindLateReply
		d.Why = "the reply matches " + keyText(c.Key) + ": a late reply still resolves an Unresolved call"
	default:
		d.Kind = KindMatchingReply
		d.Why = "the reply matches " + keyText(c.Key) + ", which was Pending: the first final reply wins"
	}
	return d
}

// sameOutcome reports whether r repeats c's final outcome exactly.
func sameOutcome(c Call, r Reply) bool {
	same := c.Status == Completed && r.Outcome == Completion || c.Status == Rejected && r.Outcome == Rejection
	return same && c.Text == r.Text
}

func keyText(k Key) string { return k.RunID + "/" + k.CallID }

// otherKey names k next to the current key cur: only its runId when the
// callIds agree, as a student compares runs.
func otherKey(k, cur Key) string {
	if k.CallID == cur.CallID && k.RunID != "" {
		return k.RunID
	}
	return keyText(k)
}

func finalWhy(c Call) string {
	what := c.Text
	switch {
	case c.Status == Rejected:
		what = "rejected: " + c.Text
	case c.Text == "":
		what = "an empty output"
	}
	return "the call already has its final outcome: " + what
}

// syntaxWhy says where raw stops being JSON and what was expected there.
func syntaxWhy(raw string) string {
	_, err := jsjson.Parse(raw)
	var se *jsjson.SyntaxError
	if !errors.As(err, &se) {
		return "not valid JSON"
	}
	found := "the end of the text"
	if se.Offset < len(raw) {
		r, size := utf8.DecodeRuneInString(raw[se.Offset:])
		if r == utf8.RuneError && size == 1 {
			found = "the byte 0x" + strconv.FormatUint(uint64(raw[se.Offset]), 16)
		} else {
			found = strconv.Quote(string(r))
		}
	}
	return "not valid JSON at position " + strconv.Itoa(jsjson.Position(raw, se.Offset)) + ": expected " + se.Expected + ", found " + found
}

// shapeWhy says which part of valid JSON raw is not what a reply needs, in
// the order ParseReply looks.
func shapeWhy(raw string) string {
	const prefix = "valid JSON but not a reply: "
	v, err := jsjson.Parse(raw)
	if err != nil {
		return syntaxWhy(raw)
	}
	if v.Kind != jsjson.Object {
		return prefix + "it is " + kindPhrase(v.Kind) + ", not an object"
	}
	for _, field := range []string{"runId", "callId", "kind"} {
		if why, bad := stringMember(v, field); bad {
			return prefix + why
		}
	}
	kind, _ := v.String("kind")
	field := ""
	switch kind {
	case "completed":
		field = "output"
	case "rejected":
		field = "reason"
	default:
		return prefix + "kind is " + strconv.Quote(kind) + `, not "completed" or "rejected"`
	}
	if why, bad := stringMember(v, field); bad {
		return prefix + why + " (a " + kind + " reply needs a string " + field + ")"
	}
	return prefix + "it does not decode" // unreachable while ParseReply and this agree
}

// stringMember says what is wrong with v's member field, which must be a string.
func stringMember(v jsjson.Value, field string) (string, bool) {
	m, ok := v.Member(field)
	switch {
	case !ok:
		return field + " is missing", true
	case m.Kind != jsjson.String:
		return field + " is " + kindPhrase(m.Kind) + ", not a string", true
	}
	return "", false
}

func kindPhrase(k jsjson.Kind) string {
	switch k {
	case jsjson.Null:
		return "null"
	case jsjson.Array, jsjson.Object:
		return "an " + k.String()
	}
	return "a " + k.String()
}

// KindTally counts the predictions made about one kind of message.
type KindTally struct {
	Made, Right int
	// Said counts each word predicted, by Prediction (Said[NoPrediction] stays 0).
	Said [NumPredictions]int
}

// PredictionTally counts predictions in all and by kind of message: what a
// class's misconception summary is built from. It is comparable; tallies of
// several sessions add with Merge.
type PredictionTally struct {
	Made, Right int
	ByKind      [NumDeliveryKinds]KindTally
}

// Add counts r if it carries a prediction.
func (t *PredictionTally) Add(r Receipt) {
	if r.Predicted == NoPrediction || r.Predicted >= numPredictions || r.Kind >= numDeliveryKinds {
		return
	}
	k := &t.ByKind[r.Kind]
	t.Made++
	k.Made++
	k.Said[r.Predicted]++
	if r.Right {
		t.Right++
		k.Right++
	}
}

// Merge adds o's counts to t.
func (t *PredictionTally) Merge(o PredictionTally) {
	t.Made += o.Made
	t.Right += o.Right
	for i := range t.ByKind {
		t.ByKind[i].Made += o.ByKind[i].Made
		t.ByKind[i].Right += o.ByKind[i].Right
		for p := range t.ByKind[i].Said {
			t.ByKind[i].Said[p] += o.ByKind[i].Said[p]
		}
	}
}

// TallyPredictions counts the predictions of a session's receipts.
func TallyPredictions(receipts []Receipt) PredictionTally {
	var t PredictionTally
	for _, r := range receipts {
		t.Add(r)
	}
	return t
}

var expectedTo = [...]string{
	PredictAccepted:   "to be accepted",
	PredictIgnored:    "to be ignored",
	PredictUnresolved: "to leave the call Unresolved",
	PredictDiagnostic: "to be a diagnostic",
}

// Expectation says in a sentence how many of made predictions about kind
// said p: "7 of 20 expected a stale reply to be accepted".
func Expectation(kind DeliveryKind, p Prediction, n, made int) string {
	what := p.String()
	if p > NoPrediction && p < numPredictions {
		what = expectedTo[p]
	}
	return strconv.Itoa(n) + " of " + strconv.Itoa(made) + " expected " + kind.Phrase() + " " + what
}
