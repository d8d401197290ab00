package server

import (
	"errors"
	"math"
	"strconv"

	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/model/jsjson"
)

// decodeFrame is the one place client frames are decoded. It parses with the
// same JSON.parse-exact parser as replies, so a raw reply reaches the model
// exactly as the browser sent it.
func decodeFrame(data []byte, by model.Actor) (model.Command, error) {
	cmd, ask, err := decodeStudentFrame(data, by)
	if err == nil && ask != nil {
		return model.Command{}, badFrame("unknown frame type %q", ask.frameType())
	}
	return cmd, err
}

// decodeStudentFrame decodes a student's frame: a command for the
// session, or a compile or typeAt the connection asks of the live
// compiler (live.go), which is no change.
func decodeStudentFrame(data []byte, by model.Actor) (model.Command, *liveAsk, error) {
	v, err := jsjson.Parse(data)
	if err != nil {
		return model.Command{}, nil, badFrame("frame is not valid JSON: %v", err)
	}
	if v.Kind != jsjson.Object {
		return model.Command{}, nil, badFrame("frame must be a JSON object, not %s", v.Kind)
	}
	typ, err := stringField(v, "type")
	if err != nil {
		return model.Command{}, nil, err
	}
	if typ == "compile" || typ == "typeAt" {
		ask, err := liveAskOf(v, typ == "typeAt")
		if err != nil {
			return model.Command{}, nil, err
		}
		return model.Command{}, &ask, nil
	}
	cmd, err := commandOf(v, typ, by)
	return cmd, nil, err
}

// liveAskOf reads a compile frame ({"type":"compile","id":N,"language":…,
// "source":…}) or a typeAt frame (the same with "line" and "column",
// 1-based).
func liveAskOf(v jsjson.Value, typeAt bool) (liveAsk, error) {
	a := liveAsk{typeAt: typeAt}
	var err error
	if a.id, err = wholeField(v, "id", 0, maxLiveID); err != nil {
		return a, err
	}
	if a.source, err = stringField(v, "source"); err != nil {
		return a, err
	}
	if len(a.source) > model.MaxSourceBytes {
		return a, &model.LimitError{Cap: "program size in bytes", Max: model.MaxSourceBytes}
	}
	if a.lang, err = languageField(v); err != nil {
		return a, err
	}
	if typeAt {
		if a.line, err = wholeField(v, "line", 1, maxLivePlace); err != nil {
			return a, err
		}
		if a.column, err = wholeField(v, "column", 1, maxLivePlace); err != nil {
			return a, err
		}
	}
	return a, nil
}

// maxLiveID is the largest id a compile or typeAt may carry: what a page's
// number holds exactly. maxLivePlace bounds a line or column.
const (
	maxLiveID    = 1<<53 - 1
	maxLivePlace = 1 << 20
)

// wholeField reads key as a whole number from least to most, written as
// JSON writes numbers.
func wholeField(v jsjson.Value, key string, least, most int64) (int64, error) {
	m, ok := v.Member(key)
	if !ok {
		return 0, badFrame("missing field %q", key)
	}
	if m.Kind != jsjson.Number {
		return 0, badFrame("field %q must be a number, not %s", key, m.Kind)
	}
	f, err := strconv.ParseFloat(m.Text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || f < float64(least) || f > float64(most) || f != math.Trunc(f) {
		return 0, badFrame("field %q must be a whole number from %d to %d, not %s", key, least, most, m.Text)
	}
	return int64(f), nil
}

// commandOf reads a student's or instructor's frame of type typ as a
// command.
func commandOf(v jsjson.Value, typ string, by model.Actor) (model.Command, error) {
	switch typ {
	case "start":
		return model.Command{Kind: model.StartRun, By: by}, nil
	case "practice":
		return model.Command{Kind: model.DrawPractice, By: by}, nil
	case "queueDeadline":
		return model.Command{Kind: model.QueueDeadline, By: by}, nil
	case "queueReply":
		raw, err := stringField(v, "raw")
		if err != nil {
			return model.Command{}, err
		}
		return model.Command{Kind: model.QueueReply, By: by, Raw: raw}, nil
	case "deliver":
		id, err := messageField(v)
		if err != nil {
			return model.Command{}, err
		}
		predict, err := predictField(v)
		if err != nil {
			return model.Command{}, err
		}
		return model.Command{Kind: model.Deliver, By: by, Message: id, Predict: predict}, nil
	case "rename":
		name, err := stringField(v, "name")
		if err != nil {
			return model.Command{}, err
		}
		return model.Command{Kind: model.Rename, By: by, Name: name}, nil
	case "submitCode":
		source, err := stringField(v, "source")
		if err != nil {
			return model.Command{}, err
		}
		if len(source) > model.MaxSourceBytes {
			return model.Command{}, &model.LimitError{Cap: "program size in bytes", Max: model.MaxSourceBytes}
		}
		lang, err := languageField(v)
		if err != nil {
			return model.Command{}, err
		}
		return model.Command{Kind: model.SubmitCode, By: by, Source: source, Lang: lang}, nil
	}
	return model.Command{}, badFrame("unknown frame type %q", typ)
}

// instructorCmd is a decoded instructor frame: typ "watch" (with session)
// or "unwatch".
type instructorCmd struct {
	typ     string
	session string
}

// decodeInstructorFrame is the one place instructor frames are decoded.
func decodeInstructorFrame(data []byte) (instructorCmd, error) {
	v, err := jsjson.Parse(data)
	if err != nil {
		return instructorCmd{}, badFrame("frame is not valid JSON: %v", err)
	}
	if v.Kind != jsjson.Object {
		return instructorCmd{}, badFrame("frame must be a JSON object, not %s", v.Kind)
	}
	typ, err := stringField(v, "type")
	if err != nil {
		return instructorCmd{}, err
	}
	switch typ {
	case "unwatch":
		return instructorCmd{typ: typ}, nil
	case "watch":
		id, err := stringField(v, "session")
		if err != nil {
			return instructorCmd{}, err
		}
		if !canonicalID(id) {
			return instructorCmd{}, badFrame(`field "session" must be a session id (a lower-case UUID)`)
		}
		return instructorCmd{typ: typ, session: id}, nil
	}
	return instructorCmd{}, badFrame("unknown frame type %q", typ)
}

// frameType names a command by its frame type, for metrics.
func frameType(k model.CommandKind) string {
	switch k {
	case model.StartRun:
		return "start"
	case model.QueueReply:
		return "queueReply"
	case model.QueueDeadline:
		return "queueDeadline"
	case model.Deliver:
		return "deliver"
	case model.Rename:
		return "rename"
	case model.SubmitCode:
		return "submitCode"
	case model.DrawPractice:
		return "practice"
	}
	return "other"
}

func stringField(v jsjson.Value, key string) (string, error) {
	m, ok := v.Member(key)
	if !ok {
		return "", badFrame("missing field %q", key)
	}
	if m.Kind != jsjson.String {
		return "", badFrame("field %q must be a string, not %s", key, m.Kind)
	}
	return m.Text, nil
}

// messageField reads "message" as a positive whole number, written as JSON
// writes numbers (so 2, 2.0 and 2e0 are all message 2).
func messageField(v jsjson.Value) (int, error) {
	m, ok := v.Member("message")
	if !ok {
		return 0, badFrame(`missing field "message"`)
	}
	if m.Kind != jsjson.Number {
		return 0, badFrame(`field "message" must be a number, not %s`, m.Kind)
	}
	f, err := strconv.ParseFloat(m.Text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, badFrame(`field "message" must be a number`)
	}
	if f < 1 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, badFrame(`field "message" must be a message id (a whole number from 1), not %s`, m.Text)
	}
	return int(f), nil
}

// languageField reads the optional "language" of a submitCode frame;
// absent is JavaScript, as before the field existed.
func languageField(v jsjson.Value) (model.Language, error) {
	if _, ok := v.Member("language"); !ok {
		return model.JavaScript, nil
	}
	word, err := stringField(v, "language")
	if err != nil {
		return 0, err
	}
	lang, ok := model.ParseLanguage(word)
	if !ok || word == "" {
		return 0, badFrame(`field "language" must be "rescript" or "javascript", not %q`, word)
	}
	return lang, nil
}

// predictField reads the optional "predict" of a deliver frame: one of the
// model's four prediction words; absent is no prediction.
func predictField(v jsjson.Value) (model.Prediction, error) {
	if _, ok := v.Member("predict"); !ok {
		return model.NoPrediction, nil
	}
	word, err := stringField(v, "predict")
	if err != nil {
		return model.NoPrediction, err
	}
	p, ok := model.ParsePrediction(word)
	if !ok || p == model.NoPrediction {
		return model.NoPrediction, badFrame(`field "predict" must be one of "accepted", "ignored", "unresolved" or "diagnostic", not %q`, word)
	}
	return p, nil
}

// stateEncoder encodes one session's state frames, once per change; the
// bytes go to every connection of the session. Held messages and receipts
// never change once added, so it keeps them encoded and encodes only what a
// change adds.
//
// A frame lists the queue, then the receipts, then everything else (seq,
// call, notice, draft, name, exercise): what grows comes first and what is
// rewritten comes last. So the session's frame, once nobody else holds it,
// is written over from the first byte that changed (rewrite): a change
// copies what it adds, and a queued message the receipts after it, not the
// whole state. JSON's objects are unordered; the keys' order is no part of
// the protocol.
type stateEncoder struct {
	queue, receipts []byte // encoded entries, comma-separated
	held, received  int    // entries encoded so far
	// rest is what follows the receipts, as of the last encode.
	rest   []byte
	prefix []byte // the frame's start, up to its queue: the same in every frame
	// The parts that change with only some changes, each encoded again
	// only when what it is encoded from does: queueing changes neither the
	// call nor the notice; the draft changes with a new run; the tail
	// (after the draft) with a step, a prediction, a rename or a setting.
	call  encodedPart[callKey]
	draft encodedPart[string]
	tail  encodedPart[tailKey]
	// practice is the mastery and the practice drawn, encoded again only
	// when a prediction was made (mastery changes with nothing else:
	// model.Mastery.add) or the practice changed: comparing the mastery
	// itself on every change cost 3 % of a change's CPU.
	practice     []byte
	practiceAt   int // the predictions made as of practice
	practiceOf   model.PracticeView
	practiceMade bool
	pool         *sharedframe.Pool
	// last is the frame made or rewritten last, and lastQueue and
	// lastReceipts how many bytes of queue and receipts it holds.
	last                    *sharedframe.Frame
	lastQueue, lastReceipts int
	// predictionsRequired is the session's class setting as of this
	// frame, and code its "code" object (code.go) encoded, "" for none;
	// the drainer sets both before encoding.
	predictionsRequired bool
	code                string
}

// betweenLists closes the queue and opens the receipts.
const betweenLists = `],"receipts":[`

// newStateEncoder returns the encoder of session's frames, which take
// their buffers from pool.
func newStateEncoder(session string, pool *sharedframe.Pool) stateEncoder {
	prefix := jsjson.AppendString([]byte(`{"type":"state","session":`), session)
	return stateEncoder{prefix: append(prefix, `,"queue":[`...), pool: pool}
}

// encode brings the encoded state up to l, which must be the same session
// as at every earlier call, and returns the view it presented; fresh or
// rewrite then puts it in a frame.
func (e *stateEncoder) encode(l *model.Lab) model.LabView {
	v := l.ViewSince(e.held, e.received)
	for _, m := range v.Queue {
		if len(e.queue) > 0 {
			e.queue = append(e.queue, ',')
		}
		e.queue = append(e.queue, `{"id":`...)
		e.queue = strconv.AppendInt(e.queue, int64(m.ID), 10)
		e.queue = append(e.queue, `,"kind":`...)
		e.queue = jsjson.AppendString(e.queue, m.Kind)
		e.queue = append(e.queue, `,"from":`...)
		e.queue = jsjson.AppendString(e.queue, m.From)
		e.queue = append(e.queue, `,"label":`...)
		e.queue = jsjson.AppendString(e.queue, m.Label)
		e.queue = append(e.queue, `,"number":`...)
		e.queue = jsjson.AppendString(e.queue, m.Number)
		e.queue = append(e.queue, '}')
	}
	for _, r := range v.Receipts {
		if len(e.receipts) > 0 {
			e.receipts = append(e.receipts, ',')
		}
		e.receipts = append(e.receipts, `{"message":`...)
		e.receipts = strconv.AppendInt(e.receipts, int64(r.Message), 10)
		e.receipts = append(e.receipts, `,"notice":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.Notice)
		e.receipts = append(e.receipts, `,"by":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.By.String())
		e.receipts = append(e.receipts, `,"number":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.Number)
		e.receipts = append(e.receipts, `,"from":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.From.String())
		e.receipts = append(e.receipts, `,"why":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.Why)
		e.receipts = append(e.receipts, `,"kind":`...)
		e.receipts = jsjson.AppendString(e.receipts, r.Kind.String())
		if r.Practice {
			e.receipts = append(e.receipts, `,"practice":true`...)
		}
		if r.Predicted != model.NoPrediction {
			e.receipts = append(e.receipts, `,"predicted":`...)
			e.receipts = jsjson.AppendString(e.receipts, r.Predicted.String())
			e.receipts = append(e.receipts, `,"right":`...)
			e.receipts = strconv.AppendBool(e.receipts, r.Right)
		}
		e.receipts = append(e.receipts, '}')
	}
	e.held, e.received = v.Held, v.Received

	b := append(e.rest[:0], `],"seq":`...)
	b = strconv.AppendUint(b, v.Seq, 10)
	b = append(b, e.call.of(callKey{v.Call, v.Notice}, appendCall)...)
	b = append(b, `,"draft":`...)
	b = append(b, e.draft.of(v.Draft, jsjson.AppendString)...)
	b = append(b, e.tail.of(tailKey{v.Name, v.Exercise, e.predictionsRequired, v.Predicted, v.Right}, appendTail)...)
	if !e.practiceMade || v.Predicted != e.practiceAt || v.Practice != e.practiceOf {
		var m model.Mastery
		if v.Mastery != nil {
			m = *v.Mastery
		}
		e.practice = appendPractice(e.practice[:0], m, v.Practice)
		e.practiceAt, e.practiceOf, e.practiceMade = v.Predicted, v.Practice, true
	}
	b = append(b, e.practice...)
	if e.code != "" {
		b = append(b, `,"code":`...)
		b = append(b, e.code...)
	}
	e.rest = append(b, '}')
	return v
}

// size is the length of the frame encode encoded.
func (e *stateEncoder) size() int {
	return len(e.prefix) + len(e.queue) + len(betweenLists) + len(e.receipts) + len(e.rest)
}

// fresh returns a new frame of the state last encoded, with one reference,
// the caller's. It copies the whole state.
func (e *stateEncoder) fresh() *sharedframe.Frame {
	f := e.pool.Get(e.size())
	b := append(f.Data, e.prefix...)
	b = append(b, e.queue...)
	b = append(b, betweenLists...)
	b = append(b, e.receipts...)
	f.Data = append(b, e.rest...)
	e.last, e.lastQueue, e.lastReceipts = f, len(e.queue), len(e.receipts)
	return f
}

// rewrite writes the state last encoded over f from the first byte that
// changed, and reports whether it did. It does so only when f is the frame
// made last, only its holder (the caller) holds it, and the state fits in
// its buffer. A frame is retained only under the lock that guards handing
// it out, and the caller holds that lock, so nobody takes f meanwhile.
func (e *stateEncoder) rewrite(f *sharedframe.Frame) bool {
	if f == nil || f != e.last || f.Refs() != 1 || e.size() > cap(f.Data) {
		return false
	}
	// A new message moves the receipts after it; else only new receipts
	// and what follows them are written.
	var b []byte
	if e.lastQueue != len(e.queue) {
		b = append(f.Data[:len(e.prefix)+e.lastQueue], e.queue[e.lastQueue:]...)
		b = append(b, betweenLists...)
		b = append(b, e.receipts...)
	} else {
		b = append(f.Data[:len(e.prefix)+e.lastQueue+len(betweenLists)+e.lastReceipts], e.receipts[e.lastReceipts:]...)
	}
	f.Data = append(b, e.rest...)
	e.lastQueue, e.lastReceipts = len(e.queue), len(e.receipts)
	return true
}

// frame encodes the state of l into a new frame, with one reference, the
// caller's, and returns the view it presented: for a session not yet
// shared with anyone.
func (e *stateEncoder) frame(l *model.Lab) (*sharedframe.Frame, model.LabView) {
	v := e.encode(l)
	return e.fresh(), v
}

// encodedPart is a part of a state frame kept encoded, with what it was
// encoded from.
type encodedPart[K comparable] struct {
	b    []byte
	from K
	made bool // b holds from encoded (a new session's key is K's zero)
}

// of returns the part encoded from k, encoding it with appendPart only
// when k is not what the part was last encoded from.
func (p *encodedPart[K]) of(k K, appendPart func([]byte, K) []byte) []byte {
	if !p.made || k != p.from {
		p.b, p.from, p.made = appendPart(p.b[:0], k), k, true
	}
	return p.b
}

// callKey is what a state frame's call and notice are encoded from.
type callKey struct {
	call   model.CallView
	notice string
}

// appendCall appends a state frame's call and notice.
func appendCall(b []byte, k callKey) []byte {
	b = append(b, `,"call":{"runId":`...)
	b = jsjson.AppendString(b, k.call.RunID)
	b = append(b, `,"callId":`...)
	b = jsjson.AppendString(b, k.call.CallID)
	b = append(b, `,"status":`...)
	b = jsjson.AppendString(b, k.call.Status)
	b = append(b, `,"detail":`...)
	b = jsjson.AppendString(b, k.call.Detail)
	b = append(b, `},"notice":`...)
	return jsjson.AppendString(b, k.notice)
}

// tailKey is everything a state frame's tail is encoded from.
type tailKey struct {
	name                string
	exercise            model.Exercise
	predictionsRequired bool
	predicted, right    int
}

// appendTail appends the name and the exercise, after the draft (the
// practice and the code follow: encode).
func appendTail(b []byte, k tailKey) []byte {
	b = append(b, `,"name":`...)
	b = jsjson.AppendString(b, k.name)
	return appendExercise(b, k.exercise, k.predicted, k.right, k.predictionsRequired)
}

// errorFrame tells a client why its frame was refused: the sentence for
// people in "error" (the contract), the stable word in "reason".
func errorFrame(r refusal) []byte {
	b := []byte(`{"type":"error","error":`)
	b = jsjson.AppendString(b, r.text)
	b = append(b, `,"reason":`...)
	b = jsjson.AppendString(b, r.reason)
	return append(b, '}')
}

// liveErrorFrame is errorFrame for a refused compile or typeAt: with its
// "id", so that the page tells it from a refused change and shows it
// quietly.
func liveErrorFrame(r refusal, id int64) []byte {
	b := errorFrame(r)
	b = append(b[:len(b)-1], `,"id":`...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, '}')
}

// compiledFrame answers a compile: what the compiler (or, for
// JavaScript, the parser) said of the source, and, when it could not say
// (the compiler was stopped), why in "error".
func compiledFrame(id int64, diags []model.Diagnostic, why string) []byte {
	if diags == nil {
		diags = []model.Diagnostic{}
	}
	b := []byte(`{"type":"compiled","id":`)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"diagnostics":`...)
	b = append(b, mustJSON(diags)...)
	if why != "" {
		b = append(b, `,"error":`...)
		b = jsjson.AppendString(b, why)
	}
	return append(b, '}')
}

// typeAtFrame answers a typeAt: the type at the place asked, "" where
// nothing has one.
func typeAtFrame(id int64, text string) []byte {
	b := []byte(`{"type":"typeAt","id":`)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"text":`...)
	b = jsjson.AppendString(b, text)
	return append(b, '}')
}
