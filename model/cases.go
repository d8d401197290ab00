package model

import (
	"strconv"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// Case is one named trace of the code check: a walkthrough step, a
// campaign trace, or an instructor's own case (its name as they gave it).
type Case struct {
	Name   string `json:"name"`
	Frames Trace  `json:"frames"`
}

// CampaignSize is how many random traces a campaign draws; a campaign may
// add a few directed ones so that every notice occurs (Campaign).
const CampaignSize = 240

// campaignMaxFrames bounds the length of a random trace.
const campaignMaxFrames = 30

// Cases is every built-in case for seed, in the order Check plays them
// (the instructor's own cases go between the two).
func Cases(seed uint64) []Case {
	return append(Walkthrough(), Campaign(seed)...)
}

// Walkthrough is the seed's nine steps ("Try delayed and reordered
// replies") as worded, a case each. The walkthrough is one session, so
// case k is the walkthrough from the start through step k: step 3
// delivers the message step 1 held.
func Walkthrough() []Case {
	k := func(run int) Key { return Key{RunID: runID(run), CallID: CallID} }
	complete := func(run int, out string) Command { return replyFrame(replyJSON(k(run), "completed", "output", out)) }
	reject := func(run int, why string) Command { return replyFrame(replyJSON(k(run), "rejected", "reason", why)) }
	parts := [NumSteps][]Command{
		// 1. run-1's completion with output Old answer, held (message 1).
		{complete(1, "Old answer")},
		// 2. run-2; its New answer queued (2) and delivered.
		{startFrame(), complete(2, "New answer"), deliverFrame(2)},
		// 3. The held run-1 reply: a different call identity.
		{deliverFrame(1)},
		// 4. Message 2 again; another output (3); the opposite kind (4).
		{deliverFrame(2), complete(2, "Another answer"), deliverFrame(3), reject(2, "No such page"), deliverFrame(4)},
		// 5. run-3: its deadline (5), its default completion (6); deadline first.
		{startFrame(), deadlineFrame(), replyFrame(Draft(k(3))), deliverFrame(5), deliverFrame(6)},
		// 6. run-4: the same with the rejection "The query is empty" (7, 8).
		{startFrame(), deadlineFrame(), reject(4, "The query is empty"), deliverFrame(7), deliverFrame(8)},
		// 7. run-5: a completion (10) before its deadline (9); then a
		// deadline (11), run-6, and the old deadline.
		{startFrame(), deadlineFrame(), complete(5, "Answer for run-5"), deliverFrame(10), deliverFrame(9),
			deadlineFrame(), startFrame(), deliverFrame(11)},
		// 8. While run-6 is Pending: another callId (12), "{" (13), a numeric output (14).
		{replyFrame(replyJSON(Key{RunID: runID(6), CallID: "search"}, "completed", "output", "Answer for run-6")), deliverFrame(12),
			replyFrame("{"), deliverFrame(13),
			replyFrame(`{"runId":"run-6","callId":"lookup","kind":"completed","output":42}`), deliverFrame(14)},
		// 9. run-7 completes with "" (15); run-8 with markup (16).
		{startFrame(), complete(7, ""), deliverFrame(15), startFrame(), complete(8, "<strong>Found it</strong>"), deliverFrame(16)},
	}
	out := make([]Case, NumSteps)
	var t Trace
	for i, p := range parts {
		t = append(t, p...)
		out[i] = Case{Name: "walkthrough step " + strconv.Itoa(i+1), Frames: append(Trace(nil), t...)}
	}
	return out
}

// rng is splitmix64: a small generator whose output is fixed by its
// definition, so a seed gives the same campaign in every build.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func pick[T any](r *rng, xs []T) T { return xs[r.intn(len(xs))] }

// Campaign is CampaignSize random traces for seed, each of 1 to 30
// frames, drawn while playing them on a Lab so that a draw can aim at the
// call's state: replies for the current call, older and later runs,
// another call id, identifiers with spaces, duplicates and contradictions
// once final, malformed JSON, the wrong shape, empty and markup-like
// outputs; deadlines before and after a final reply and for older runs.
// Any of the seed's notices the draws missed is then reached by a directed
// trace appended at the end, so every notice occurs for every seed.
func Campaign(seed uint64) []Case {
	out := make([]Case, 0, CampaignSize+4)
	seen := map[string]bool{}
	for i := range CampaignSize {
		r := &rng{s: seed ^ (uint64(i)+1)*0xd1b54a32d192ed03}
		t := randomTrace(r, 1+r.intn(campaignMaxFrames), seen)
		out = append(out, Case{Name: "campaign " + strconv.Itoa(i+1), Frames: t})
	}
	for _, d := range directed() {
		if !seen[d.notice] {
			out = append(out, Case{Name: "campaign: " + d.notice, Frames: d.frames})
		}
	}
	return out
}

// directed are short traces that reach each notice a delivery or the host
// can leave.
func directed() []struct {
	notice string
	frames Trace
} {
	run1 := Draft(Key{RunID: "run-1", CallID: CallID})
	type d = struct {
		notice string
		frames Trace
	}
	return []d{
		{NoticeReady, Trace{deadlineFrame()}},
		{NoticeStarted, Trace{startFrame()}},
		{NoticeInvalidJSON, Trace{replyFrame("{"), deliverFrame(1)}},
		{NoticeInvalidReply, Trace{replyFrame("[]"), deliverFrame(1)}},
		{NoticeReplyOtherCall, Trace{replyFrame(run1), startFrame(), deliverFrame(1)}},
		{NoticeReplyAlreadyFinal, Trace{replyFrame(run1), deliverFrame(1), deliverFrame(1)}},
		{NoticeAcceptedComplete, Trace{replyFrame(run1), deliverFrame(1)}},
		{NoticeAcceptedReject, Trace{replyFrame(replyJSON(Key{RunID: "run-1", CallID: CallID}, "rejected", "reason", "No")), deliverFrame(1)}},
		{NoticeDeadlineOtherCall, Trace{deadlineFrame(), startFrame(), deliverFrame(1)}},
		{NoticeUnresolved, Trace{deadlineFrame(), deliverFrame(1)}},
		{NoticeStillUnresolved, Trace{deadlineFrame(), deliverFrame(1), deliverFrame(1)}},
		{NoticeDeadlineFinal, Trace{replyFrame(run1), deadlineFrame(), deliverFrame(1), deliverFrame(2)}},
	}
}

// randomTrace draws n frames, playing them on the reference; seen
// collects the notices shown after each frame.
func randomTrace(r *rng, n int, seen map[string]bool) Trace {
	g := &drawing{ref: newRefHost()}
	t := make(Trace, 0, n)
	for len(t) < n {
		var f Command
		switch w := r.intn(100); {
		case w < 10:
			f = startFrame()
		case w < 22:
			f = deadlineFrame()
		case w < 55 || len(g.ref.held) == 0:
			f = replyFrame(randomReply(r, g))
		default:
			f = deliverFrame(g.pickMessage(r))
		}
		was := g.ref.call.Status
		if err := g.ref.step(f); err != nil {
			panic(err) // every frame drawn is valid
		}
		switch {
		case f.Kind == StartRun:
			g.accepted = 0
		case f.Kind == Deliver:
			g.delivered = append(g.delivered, f.Message)
			if !was.Final() && g.ref.call.Status.Final() {
				g.accepted = f.Message
			}
		}
		seen[g.ref.notice] = true
		t = append(t, f)
	}
	return t
}

// drawing is a trace being drawn: the reference playing it, the message
// that brought the current call's final outcome (0 while none did), and
// the messages delivered so far.
type drawing struct {
	ref       *refHost
	accepted  int
	delivered []int
}

// pickMessage chooses a held message to deliver: most often the newest,
// else any, else one already delivered (a duplicate delivery).
func (g *drawing) pickMessage(r *rng) int {
	n := len(g.ref.held)
	switch w := r.intn(10); {
	case w < 4:
		return n
	case w < 8 || len(g.delivered) == 0:
		return 1 + r.intn(n)
	default:
		return pick(r, g.delivered)
	}
}

// Texts the campaign's replies carry.
var (
	campaignOutputs = []string{
		"New answer", "Old answer", "", "<strong>Found it</strong>", "<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>", "&amp; &lt;", "café ☕ 日本", "line one\nline two", "  padded  ",
		`say "hi"`, `back\slash`, "Promise.all", "0", "null",
	}
	campaignReasons = []string{"The query is empty", "No such page", "", "<em>denied</em>", "timeout", " "}
	otherCallIDs    = []string{"search", "Lookup", "", "lookup2", "LOOKUP"}
	malformed       = []string{
		"{", "", " ", "not json", "undefined", "NaN", "[1,", "<strong>Found it</strong>",
		`{'runId':'run-1'}`, `{"runId":"run-1",}`, `{runId:"run-1"}`, "\u00a0{}", `"unterminated`, "{}}",
	}
)

// randomReply draws a reply's raw text for the current call.
func randomReply(r *rng, g *drawing) string {
	cur := g.ref.call.Key
	runs := g.ref.runs
	kind, field, text := "completed", "output", pick(r, campaignOutputs)
	if r.intn(3) == 0 {
		kind, field, text = "rejected", "reason", pick(r, campaignReasons)
	}
	key := cur
	switch w := r.intn(100); {
	case w < 35: // for the current call
	case w < 50: // an older run's, or one the lab never gave
		if runs > 1 && r.intn(4) != 0 {
			key.RunID = runID(1 + r.intn(runs-1))
		} else {
			key.RunID = pick(r, []string{runID(runs + 1), "run-0", "run-01", "RUN-1", ""})
		}
	case w < 57: // another call id
		key.CallID = pick(r, otherCallIDs)
	case w < 62: // identifiers with spaces
		if r.intn(2) == 0 {
			key.RunID = pick(r, []string{" ", "\t", "\n"}) + key.RunID
		} else {
			key.CallID += pick(r, []string{" ", "\t", "\u00a0"})
		}
	case w < 70: // the accepted reply again, word for word
		if g.accepted != 0 && g.ref.held[g.accepted-1].Kind == ReplyMessage {
			return g.ref.held[g.accepted-1].Raw
		}
	case w < 80:
		return pick(r, malformed)
	case w < 92:
		return wrongShape(r, key)
	default: // a reply written otherwise: extra fields, another key order, spaces, a repeated key
		return variant(r, key, kind, field, text)
	}
	return replyJSON(key, kind, field, text)
}

// wrongShape draws JSON that is not a reply for key.
func wrongShape(r *rng, key Key) string {
	b := appendKey(nil, key)
	head := string(b)
	return pick(r, []string{
		head + `,"kind":"completed","output":42}`,
		head + `,"kind":"completed","output":null}`,
		head + `,"kind":"completed","output":["a"]}`,
		head + `,"kind":"completed","output":{"text":"a"}}`,
		head + `,"kind":"completed","output":true}`,
		head + `,"kind":"completed"}`,
		head + `,"kind":"rejected","output":"a"}`,
		head + `,"kind":"completed","reason":"a"}`,
		head + `,"kind":"done","output":"a"}`,
		head + `,"kind":"Completed","output":"a"}`,
		head + `,"kind":"rejected","reason":7}`,
		head + `,"output":"a"}`,
		`{"runId":1,"callId":"lookup","kind":"completed","output":"a"}`,
		`{"callId":"lookup","kind":"completed","output":"a"}`,
		`[` + replyJSON(key, "completed", "output", "a") + `]`,
		`42`, `"text"`, `null`, `true`, `{}`, `[]`,
	})
}

// variant writes a valid reply otherwise than JSON.stringify would.
func variant(r *rng, key Key, kind, field, text string) string {
	q := func(s string) string { return string(jsjson.AppendString(nil, s)) }
	switch r.intn(5) {
	case 0: // extra fields, ignored
		return `{"runId":` + q(key.RunID) + `,"callId":` + q(key.CallID) + `,"kind":` + q(kind) + `,` + q(field) + `:` + q(text) + `,"extra":1,"reason2":null}`
	case 1: // another key order
		return `{` + q(field) + `:` + q(text) + `,"kind":` + q(kind) + `,"callId":` + q(key.CallID) + `,"runId":` + q(key.RunID) + `}`
	case 2: // whitespace around everything
		return "{\n  \"runId\" : " + q(key.RunID) + " ,\n  \"callId\": " + q(key.CallID) + ",\n  \"kind\": " + q(kind) + ",\n  " + q(field) + ": " + q(text) + "\n}\n"
	case 3: // a repeated key: the last wins, as in JSON.parse
		return `{"runId":"run-0","runId":` + q(key.RunID) + `,"callId":` + q(key.CallID) + `,"kind":"nope","kind":` + q(kind) + `,` + q(field) + `:` + q(text) + `}`
	default: // escapes for plain letters
		return `{"runId":` + q(key.RunID) + `,"callId":` + q(key.CallID) + `,"kind":` + q(kind) + `,"\u006f\u0075tput":` + q(text) + `,` + q(field) + `:` + q(text) + `}`
	}
}
