package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolcall-lab/lab/model/jsjson"
)

// The search: every sequence of the lab's own frames, within bounds,
// played breadth first on the reference and on the module together, with
// the same host and the same comparison as a case (judge). States that
// have the same future are merged, and the module is asked once per
// distinct call and message (its functions are pure), so the first
// difference found is a shortest one and needs no shrinking.
// docs/code.md describes the alphabet, the bounds and what they leave out.

// SearchBounds bounds the search.
type SearchBounds struct {
	Depth  int // frames in a sequence; 0 plays no search
	Runs   int // runs, the first included: at most Runs-1 starts
	Held   int // messages held at once (at most 8)
	States int // distinct states visited, a cap on the work
	Calls  int // calls of the module (begin, receive, expire, view, its JSON), a cap on the work
}

// DefaultSearchBounds are the bounds Check searches within.
func DefaultSearchBounds() SearchBounds {
	return SearchBounds{Depth: 5, Runs: 3, Held: 5, States: 200_000, Calls: 20_000}
}

// SearchName is the search's name as a case.
func SearchName(depth int) string {
	return "every sequence of up to " + strconv.Itoa(depth) + " frames"
}

// Situation is one situation of the lesson the search counts: how many
// explored steps exercised it, and whether the module was right at every
// one of them.
type Situation struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Hit    int    `json:"hit"`
	Passed bool   `json:"passed"`
}

// The situations, in the order a Result lists them.
const (
	sitCompletion = iota
	sitRejection
	sitOlderRun
	sitOtherCallID
	sitSpaces
	sitSameKind
	sitOpposite
	sitReplayed
	sitDeadlinePending
	sitDeadlineResult
	sitLateReply
	sitRepeatedDeadline
	sitOlderDeadline
	sitMalformed
	sitWrongShape
	sitEmptyOutput
	sitMarkup
	sitNewRun
	numSituations
)

var situations = [numSituations]struct{ id, text string }{
	sitCompletion:       {"completion", "a completion for the current run"},
	sitRejection:        {"rejection", "a rejection for the current run"},
	sitOlderRun:         {"olderRun", "a reply for an older run"},
	sitOtherCallID:      {"otherCallId", "a reply for another call id"},
	sitSpaces:           {"spaces", "identifiers that differ only by spaces"},
	sitSameKind:         {"sameKindAgain", "a second final reply of the same kind"},
	sitOpposite:         {"oppositeKind", "a final reply of the opposite kind"},
	sitReplayed:         {"replayed", "a message delivered again"},
	sitDeadlinePending:  {"deadlinePending", "a deadline while Pending"},
	sitDeadlineResult:   {"deadlineAfterResult", "a deadline after a result"},
	sitLateReply:        {"lateReply", "a reply after the deadline"},
	sitRepeatedDeadline: {"repeatedDeadline", "a repeated deadline"},
	sitOlderDeadline:    {"olderDeadline", "a deadline for an older run"},
	sitMalformed:        {"malformedJson", "text that is not JSON"},
	sitWrongShape:       {"wrongShape", "JSON of the wrong shape"},
	sitEmptyOutput:      {"emptyOutput", "an empty output"},
	sitMarkup:           {"markup", "markup in the output"},
	sitNewRun:           {"newRun", "a new run"},
}

// situationsOf are the situations of one step, from the reference's side:
// what the delivered message was to the call (Explain's kind) and the
// call's state; replayed says the message was delivered before.
func situationsOf(rs refStep, d Delivery, replayed bool) uint32 {
	var set uint32
	add := func(s int) { set |= 1 << s }
	if rs.frame.Kind == StartRun {
		add(sitNewRun)
	}
	if rs.frame.Kind != Deliver {
		return set
	}
	if replayed {
		add(sitReplayed)
	}
	r := d.Reply
	trimmed := d.OK && strings.TrimSpace(r.Key.RunID) == rs.before.Key.RunID && strings.TrimSpace(r.Key.CallID) == rs.before.Key.CallID
	switch d.Kind {
	case KindMatchingReply, KindLateReply:
		if d.Kind == KindLateReply {
			add(sitLateReply)
		}
		if r.Outcome == Completion {
			add(sitCompletion)
			if r.Text == "" {
				add(sitEmptyOutput)
			}
			if strings.Contains(r.Text, "<") {
				add(sitMarkup)
			}
		} else {
			add(sitRejection)
		}
	case KindStaleReply:
		switch {
		case trimmed:
			add(sitSpaces)
		case earlierRun(r.Key.RunID, runNumber(rs.before.Key.RunID)):
			add(sitOlderRun)
		}
	case KindWrongCallID:
		if trimmed {
			add(sitSpaces)
		} else {
			add(sitOtherCallID)
		}
	case KindDuplicate:
		add(sitSameKind)
	case KindContradictory:
		if (rs.before.Status == Completed) == (r.Outcome == Completion) {
			add(sitSameKind)
		} else {
			add(sitOpposite)
		}
	case KindDeadline:
		switch {
		case rs.before.Status == Pending:
			add(sitDeadlinePending)
		case rs.before.Status == Unresolved:
			add(sitRepeatedDeadline)
		default:
			add(sitDeadlineResult)
		}
	case KindStaleDeadline:
		add(sitOlderDeadline)
	case KindMalformedJSON:
		add(sitMalformed)
	case KindWrongShape:
		add(sitWrongShape)
	}
	return set
}

// SearchReplies is the search's alphabet of replies while runs runs exist,
// drawn from the lesson's decoder so that every guard of it is reached: a
// completion and a rejection for every run so far; for the current run a
// second completion with another output, another call id, an empty
// output, markup, extra fields, a numeric output and reason, a completion
// with a reason instead of an output, an unknown kind, no kind, no runId
// and no callId for each kind, and identifiers that differ only by a
// space; then text that is not JSON (an unclosed brace, and an object
// after a no-break space, which JSON.parse does not skip but trim does)
// and JSON that is not an object (null, an array, a number).
func SearchReplies(runs int) []string {
	var out []string
	for k := 1; k <= runs; k++ {
		key := Key{RunID: runID(k), CallID: CallID}
		out = append(out, replyJSON(key, "completed", "output", "Answer"), replyJSON(key, "rejected", "reason", "No such page"))
	}
	cur := Key{RunID: runID(runs), CallID: CallID}
	head := string(appendKey(nil, cur))
	run := `{"runId":` + string(jsjson.AppendString(nil, cur.RunID))
	return append(out,
		replyJSON(cur, "completed", "output", "Another answer"),
		replyJSON(Key{RunID: cur.RunID, CallID: "search"}, "completed", "output", "Answer"),
		replyJSON(cur, "completed", "output", ""),
		replyJSON(cur, "completed", "output", "<strong>Found it</strong>"),
		head+`,"kind":"completed","output":"Answer","extra":1}`,
		head+`,"kind":"completed","output":42}`,
		head+`,"kind":"rejected","reason":7}`,
		head+`,"kind":"completed","reason":"No such page"}`,
		head+`,"kind":"done","output":"Answer"}`,
		head+`,"output":"Answer"}`,
		`{"callId":"lookup","kind":"completed","output":"Answer"}`,
		`{"callId":"lookup","kind":"rejected","reason":"No such page"}`,
		run+`,"kind":"completed","output":"Answer"}`,
		run+`,"kind":"rejected","reason":"No such page"}`,
		replyJSON(Key{RunID: " " + cur.RunID, CallID: CallID}, "completed", "output", "Answer"),
		replyJSON(Key{RunID: cur.RunID, CallID: CallID + " "}, "completed", "output", "Answer"),
		"{", "\u00a0{}", "null", "[]", "42",
	)
}

// SearchReport is what a search did: the states it visited, whether it
// covered every sequence within its bounds, the situations it met, and
// the first difference it found (a shortest one), if any.
type SearchReport struct {
	Explored  int
	Steps     int // transitions judged
	Calls     int // calls of the module
	Depth     int
	Exhausted bool
	Coverage  []Situation
	// Note says in words why the search is not exhaustive beyond its caps:
	// a module with state outside its call values, or call values that
	// cannot be written as JSON.
	Note    string
	Failure *Failure
	// Error is set when the module could not be made or was stopped
	// (ErrStop); Failure then says where, when it was at a step.
	Error string
	stop  bool
	o     *outcome
}

// Search plays every sequence of frames within b on the reference and on
// one fresh instance of newClient's module.
func Search(newClient NewClient, b SearchBounds) SearchReport {
	rep := SearchReport{Depth: b.Depth}
	c, err := newClient()
	if err != nil {
		rep.Error, rep.stop = err.Error(), true
		return rep
	}
	s := newSearch(c, b)
	s.newClient = newClient
	s.run()
	if s.restart {
		// The module keeps state outside its calls: search again, every
		// sequence played on a fresh instance, within what is left.
		s.reset()
		s.run()
	}
	if s.fresh && s.setupErr != nil {
		rep.Error, rep.stop = s.setupErr.Error(), true
		return rep
	}
	rep.Explored, rep.Steps, rep.Calls = len(s.visited), s.steps, s.calls
	rep.Exhausted = !s.cut && s.hidden == "" && s.unkeyed == 0
	var notes []string
	if s.hidden != "" {
		notes = append(notes, s.hidden)
	}
	if s.unkeyed > 0 {
		why := "this module has no way to write its calls as JSON"
		if s.keyer != nil {
			why = strconv.Itoa(s.unkeyed) + " of its call values could not be written as JSON (" + s.unkeyedWhy + ")"
		}
		notes = append(notes, "States were not merged by the module's call, because "+why+".")
	}
	rep.Note = strings.Join(notes, " ")
	for i := range numSituations {
		rep.Coverage = append(rep.Coverage, Situation{ID: situations[i].id, Text: situations[i].text, Hit: s.hit[i], Passed: !s.wrong[i]})
	}
	if s.first != nil {
		f := s.first.failure(SearchName(b.Depth), s.firstFrames)
		rep.Failure, rep.o = &f, s.first
		if s.first.stop != nil {
			rep.Error, rep.stop = where(SearchName(b.Depth), s.first)+": "+s.first.stop.Error(), true
		}
	}
	return rep
}

// smsg is a held message as both sides hold it: the reference's (a reply's
// text, or a deadline's key) and the module's (the text, or the
// identifiers its view showed at queue time).
type smsg struct {
	ref Message
	mod heldMsg
	pr  parsedReply
}

type msgKey struct {
	mod    heldMsg
	refKey Key
}

// sstate is a state of the search and the frame that reached it first.
type sstate struct {
	parent    *sstate
	frame     Command
	depth     int
	ref       Call
	refNotice string
	runs      int
	held      []int32 // message ids, in queue order
	delivered uint8   // bit n-1: held message n was delivered
	mod       ClientCall
	modID     int32 // the module's call by its JSON; negative: unlike any other
	show      *showing
}

// answer is the module's answer to one transition: the call it made
// current, what it shows of it, and the step's error.
type answer struct {
	next    ClientCall
	nextID  int32
	show    *showing
	mutated string
	err     error
	checked bool // asked twice already (the sample of hidden state)
	n       int  // its place in the table: the first hit of every fourth is asked again
}

type memoKey struct {
	call, msg int32 // msg: a held message's id, or -run for begin(run-k)
}

type search struct {
	b         SearchBounds
	c         Client
	keyer     CallKeyer
	newClient NewClient

	// fresh: the module keeps state outside its calls, so every transition
	// is played from the start on a fresh instance, as a case is; restart
	// asks for that mode.
	fresh, restart bool
	setupErr       error // newClient failing in fresh mode
	mutates        bool  // the module changed a call it was given

	calls, steps int
	cut          bool
	stopped      bool

	modIDs     map[string]int32
	unkeyedID  int32
	unkeyed    int
	unkeyedWhy string
	msgs       []smsg
	msgIDs     map[msgKey]int32
	refIDs     map[Call]int32
	replies    [][]int32 // by runs: the alphabet's message ids

	memo   map[memoKey]*answer
	views  map[int32]showing // the module's view of a call, by the call's id
	hits   int
	hidden string

	visited map[string]struct{}
	hit     [numSituations]int
	wrong   [numSituations]bool

	first       *outcome
	firstFrames Trace
}

func newSearch(c Client, b SearchBounds) *search {
	b.Held, b.Runs = min(b.Held, 8), max(b.Runs, 1)
	s := &search{b: b, c: c, modIDs: map[string]int32{}, msgIDs: map[msgKey]int32{}, refIDs: map[Call]int32{},
		memo: map[memoKey]*answer{}, views: map[int32]showing{}, visited: map[string]struct{}{}}
	s.keyer, _ = c.(CallKeyer)
	s.replies = make([][]int32, b.Runs+1)
	for r := 1; r <= b.Runs; r++ {
		for _, raw := range SearchReplies(r) {
			s.replies[r] = append(s.replies[r], s.msgID(heldMsg{raw: raw}, Key{}))
		}
	}
	return s
}

func (s *search) msgID(m heldMsg, refKey Key) int32 {
	k := msgKey{mod: m, refKey: refKey}
	if id, ok := s.msgIDs[k]; ok {
		return id
	}
	id := int32(len(s.msgs))
	sm := smsg{mod: m}
	if m.deadline {
		sm.ref = Message{Kind: DeadlineMessage, Key: refKey}
	} else {
		sm.ref = Message{Kind: ReplyMessage, Raw: m.raw}
	}
	sm.pr = parseNow(sm.ref)
	s.msgs = append(s.msgs, sm)
	s.msgIDs[k] = id
	return id
}

// budget says whether the module may be called again.
func (s *search) budget() bool {
	if s.calls >= s.b.Calls {
		s.cut = true
		return false
	}
	return true
}

// counting is the module, counting its calls.
type counting struct {
	Client
	n *int
}

func (c counting) Begin(runID, callID string) (ClientCall, error) {
	*c.n++
	return c.Client.Begin(runID, callID)
}

func (c counting) Receive(call ClientCall, raw string) (ClientCall, string, error) {
	*c.n++
	return c.Client.Receive(call, raw)
}

func (c counting) Expire(call ClientCall, runID, callID string) (ClientCall, string, error) {
	*c.n++
	return c.Client.Expire(call, runID, callID)
}

func (c counting) View(call ClientCall) (json.RawMessage, error) {
	*c.n++
	return c.Client.View(call)
}

// key is the module's call's id by its JSON, a fresh negative id when it
// has none.
func (s *search) key(call ClientCall) (int32, error) {
	if s.keyer != nil {
		s.calls++
		k, err := s.keyer.CallKey(call)
		if err == nil {
			id, ok := s.modIDs[k]
			if !ok {
				id = int32(len(s.modIDs))
				s.modIDs[k] = id
			}
			return id, nil
		}
		if errors.Is(err, ErrStop) {
			return 0, fmt.Errorf("writing the call as JSON: %w", err)
		}
		if s.unkeyedWhy == "" {
			s.unkeyedWhy = err.Error()
		}
	}
	s.unkeyed++
	s.unkeyedID--
	return s.unkeyedID, nil
}

// ask plays one transition on the module: begin(run-k) when begin is k,
// else delivering m to the call of st, as host.step does. The view of a
// call the module returned is taken from views when that call (by its
// JSON) was seen before, unless fresh.
func (s *search) ask(st *sstate, begin int, m heldMsg, fresh bool) *answer {
	cl := counting{s.c, &s.calls}
	a := &answer{}
	if begin > 0 {
		h := &host{c: cl, showing: *st.show, runs: begin - 1}
		_, a.err = h.step(startFrame())
		if a.err == nil {
			a.nextID, a.err = s.key(h.current)
		}
		sh := h.showing
		a.next, a.show = h.current, &sh
		return a
	}
	a.show = &showing{}
	next, notice, fn, err := deliverTo(cl, st.mod, m)
	if err != nil {
		a.err = err
		return a
	}
	after, err := cl.View(st.mod)
	if err != nil {
		a.err = fmt.Errorf("view of the call %s was given: %w", fn, err)
		return a
	}
	a.mutated = mutatedText(fn, st.show.view, after)
	a.next, a.show.notice = next, notice
	if a.nextID, a.err = s.key(next); a.err != nil {
		return a
	}
	if v, ok := s.views[a.nextID]; ok && !fresh && a.nextID >= 0 {
		a.show.view, a.show.parsed, a.show.shape = v.view, v.parsed, v.shape
		return a
	}
	v, err := cl.View(next)
	if err != nil {
		a.err = fmt.Errorf("view of the call %s returned: %w", fn, err)
		return a
	}
	a.show.setView(v)
	if a.nextID >= 0 && !fresh {
		s.views[a.nextID] = *a.show
	}
	return a
}

// answer is the module's answer to frame f from st: from the table when
// it was asked before, a sample of the table's answers asked again; a
// different answer means the module keeps state outside its calls, and
// the search restarts without the table (restart).
func (s *search) answer(st *sstate, f Command, msg int32) *answer {
	if s.fresh {
		return s.replay(st, f)
	}
	begin := 0
	if f.Kind == StartRun {
		begin = st.runs + 1
	}
	k := memoKey{call: st.modID, msg: msg}
	if begin > 0 {
		k.msg = int32(-begin)
	}
	var m heldMsg
	if begin == 0 {
		m = s.msgs[msg].mod
	}
	keyed := begin > 0 || st.modID >= 0
	if a, ok := s.memo[k]; ok && keyed {
		s.hits++
		// A module that changed a call it was given has changed calls
		// other states hold: asking again would only show that.
		if (a.checked || a.n%4 != 0) && s.hits%512 != 0 || s.mutates {
			return a
		}
		a.checked = true
		b := s.ask(st, begin, m, true)
		if errText(b.err) == errText(a.err) && b.nextID == a.nextID && b.mutated == a.mutated &&
			string(b.show.view) == string(a.show.view) && b.show.notice == a.show.notice {
			return a
		}
		if !errors.Is(b.err, ErrStop) {
			s.restart = true
		}
		return b
	}
	a := s.ask(st, begin, m, false)
	if a.mutated != "" {
		s.mutates = true
	}
	if keyed && a.nextID >= 0 {
		a.n = len(s.memo)
		s.memo[k] = a
	}
	return a
}

// path is the frames from the start to st.
func (st *sstate) path() Trace {
	var t Trace
	for p := st; p.parent != nil; p = p.parent {
		t = append(t, p.frame)
	}
	slices.Reverse(t)
	return t
}

// replay plays st's frames and then f on a fresh instance, as a case is
// played, and answers what the module did at f.
func (s *search) replay(st *sstate, f Command) *answer {
	a := &answer{show: &showing{}}
	s.calls++
	c, err := s.newClient()
	if err != nil {
		if s.setupErr == nil {
			s.setupErr = err
		}
		a.err = fmt.Errorf("a fresh instance: %w", err)
		return a
	}
	h := &host{c: counting{c, &s.calls}, showing: showing{notice: NoticeReady}, runs: 1}
	if a.err = h.begin(runID(1)); a.err != nil {
		return a
	}
	for _, g := range append(st.path(), f) {
		if a.mutated, a.err = h.step(g); a.err != nil {
			return a
		}
	}
	sh := h.showing
	a.next, a.show = h.current, &sh
	if k, ok := c.(CallKeyer); ok {
		save := s.keyer
		s.keyer = k
		a.nextID, a.err = s.key(h.current)
		s.keyer = save
	} else {
		a.nextID, a.err = s.key(h.current)
	}
	return a
}

// reset forgets what a search found, for a search again in fresh mode.
func (s *search) reset() {
	s.fresh, s.restart, s.stopped = true, false, false
	s.hidden = "The module answered the same call and message differently when asked again (it keeps state outside the call), so the search played every sequence anew on a fresh instance, as far as its budget allowed."
	s.memo, s.views = nil, nil
	s.visited = map[string]struct{}{}
	s.hit, s.wrong = [numSituations]int{}, [numSituations]bool{}
	s.first, s.firstFrames = nil, nil
	s.steps = 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// stateKey is what determines a state's future: the reference's call, the
// runs so far, the module's call and the held messages as a set (each
// with whether it was delivered).
func (s *search) stateKey(st *sstate) string {
	if s.fresh {
		// A module with state outside its calls: two paths to the same
		// calls may still have different futures.
		return strconv.Itoa(len(s.visited))
	}
	refID, ok := s.refIDs[st.ref]
	if !ok {
		refID = int32(len(s.refIDs))
		s.refIDs[st.ref] = refID
	}
	b := make([]byte, 0, 12+4*len(st.held))
	b = binary.LittleEndian.AppendUint32(b, uint32(refID))
	b = binary.LittleEndian.AppendUint32(b, uint32(st.runs))
	b = binary.LittleEndian.AppendUint32(b, uint32(st.modID))
	set := make([]uint32, len(st.held))
	for i, id := range st.held {
		set[i] = uint32(id)<<1 | uint32(st.delivered>>i&1)
	}
	slices.Sort(set)
	for _, v := range set {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return string(b)
}

func (s *search) run() {
	root := &sstate{ref: Begin(runID(1), CallID), refNotice: NoticeReady, runs: 1, show: &showing{notice: NoticeReady}}
	h := &host{c: counting{s.c, &s.calls}, showing: showing{notice: NoticeReady}, runs: 1}
	setupErr := h.begin(runID(1))
	if setupErr == nil {
		root.mod = h.current
		root.modID, setupErr = s.key(h.current)
		sh := h.showing
		root.show = &sh
	}
	if setupErr != nil {
		// Every first frame fails as in play: report the first.
		f := startFrame()
		rs := refStep{frame: f, before: root.ref, after: Begin(runID(2), CallID)}
		s.fail(judge(0, rs, NoticeStarted, nil, "", setupErr), Trace{f})
		return
	}
	s.visited[s.stateKey(root)] = struct{}{}
	level := []*sstate{root}
	for d := 0; d < s.b.Depth && len(level) > 0 && !s.halted(); d++ {
		var next []*sstate
		for _, st := range level {
			next = s.expand(st, next)
			if s.halted() {
				break
			}
		}
		level = next
	}
}

// halted says the search must stop: a cap, ErrStop, or a restart.
func (s *search) halted() bool { return s.cut || s.stopped || s.restart }

// expand judges every frame from st and returns the states it reaches
// that were not visited, appended to next.
func (s *search) expand(st *sstate, next []*sstate) []*sstate {
	left := s.b.Depth - st.depth - 1 // frames after this one
	undelivered := 0
	for i := range st.held {
		if st.delivered>>i&1 == 0 {
			undelivered++
		}
	}
	canQueue := len(st.held) < s.b.Held && undelivered+1 <= left
	held := func(id int32) bool { return slices.Contains(st.held, id) }
	try := func(f Command, msg int32) bool {
		child := s.step(st, f, msg)
		if s.halted() {
			return false
		}
		if child != nil {
			k := s.stateKey(child)
			if _, ok := s.visited[k]; !ok {
				if len(s.visited) >= s.b.States {
					s.cut = true
					return false
				}
				s.visited[k] = struct{}{}
				next = append(next, child)
			}
		}
		return true
	}
	if st.runs < s.b.Runs && !try(startFrame(), -1) {
		return next
	}
	if canQueue {
		// The deadline first: of two shortest traces, the one that holds
		// the deadline before the replies is the one reported.
		id := s.msgID(heldMsg{deadline: true, runID: st.show.parsed.RunID, callID: st.show.parsed.CallID}, st.ref.Key)
		if !held(id) && !try(deadlineFrame(), id) {
			return next
		}
		for _, id := range s.replies[st.runs] {
			if !held(id) && !try(replyFrame(s.msgs[id].mod.raw), id) {
				return next
			}
		}
	}
	for n := 1; n <= len(st.held); n++ {
		if !try(deliverFrame(n), st.held[n-1]) {
			return next
		}
	}
	return next
}

// step judges frame f from st; it returns the state reached, nil when the
// module differs there (the first difference is kept) or the work ran out.
func (s *search) step(st *sstate, f Command, msg int32) *sstate {
	s.steps++
	child := *st
	child.parent, child.frame, child.depth = st, f, st.depth+1
	rs := refStep{frame: f, before: st.ref}
	replayed := false
	var d Delivery
	var a *answer
	switch f.Kind {
	case StartRun:
		child.runs++
		child.ref, child.refNotice = Begin(runID(child.runs), CallID), NoticeStarted
		if !s.budget() {
			return nil
		}
		a = s.answer(st, f, 0)
	case QueueReply, QueueDeadline:
		child.held = append(slices.Clip(st.held), msg)
	case Deliver:
		sm := s.msgs[msg]
		rs.msg = sm.ref
		d = explain(st.ref, sm.ref, sm.pr)
		rs.kind, rs.kindKnown = d.Kind, true
		child.ref, child.refNotice = d.Call, d.Notice
		replayed = st.delivered>>(f.Message-1)&1 == 1
		child.delivered |= 1 << (f.Message - 1)
		if !s.budget() {
			return nil
		}
		a = s.answer(st, f, msg)
	}
	rs.after = child.ref
	var o *outcome
	if a != nil {
		child.mod, child.modID, child.show = a.next, a.nextID, a.show
		o = judge(st.depth, rs, child.refNotice, a.show, a.mutated, a.err)
	} else {
		o = judge(st.depth, rs, child.refNotice, st.show, "", nil)
	}
	sits := situationsOf(rs, d, replayed)
	for i := range numSituations {
		if sits>>i&1 == 1 {
			s.hit[i]++
			if o != nil {
				s.wrong[i] = true
			}
		}
	}
	if o == nil {
		return &child
	}
	if s.restart {
		return nil
	}
	if s.first == nil && o.stop == nil && !s.fresh && !s.mutates {
		// The first difference must show on a fresh instance too, as a
		// case: when it does not, the module keeps state outside its calls.
		t := child.path()
		po, err := play(s.newClient, t)
		switch {
		case po != nil && po.stop != nil:
			s.fail(po, t[:po.step+1])
			return nil
		case err != nil || po == nil || po.step != len(t)-1:
			s.restart = true
			return nil
		}
	}
	if s.first == nil || o.stop != nil {
		s.fail(o, child.path())
	}
	return nil
}

func (s *search) fail(o *outcome, t Trace) {
	if s.first == nil || o.stop != nil && s.first.stop == nil {
		s.first, s.firstFrames = o, t
	}
	if o.stop != nil {
		s.stopped = true
	}
}

// SearchSummary says in a sentence what the search checked, for the page:
// "Checked 12,408 states, every sequence of up to 5 frames: 17 of 18
// situations right; wrong: a reply after the deadline."
func (r Result) SearchSummary() string {
	if r.Depth == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Checked " + thousands(r.Explored) + " states")
	if r.Exhausted {
		b.WriteString(", every sequence of up to " + strconv.Itoa(r.Depth) + " frames")
	} else {
		b.WriteString(" of the sequences of up to " + strconv.Itoa(r.Depth) + " frames, not all of them")
	}
	var right, reached int
	var wrong, missed []string
	for _, c := range r.Coverage {
		switch {
		case c.Hit == 0:
			missed = append(missed, c.Text)
		case c.Passed:
			right++
			reached++
		default:
			reached++
			wrong = append(wrong, c.Text)
		}
	}
	if len(r.Coverage) > 0 {
		b.WriteString(": " + strconv.Itoa(right) + " of " + strconv.Itoa(len(r.Coverage)) + " situations right")
	}
	if len(wrong) > 0 {
		b.WriteString("; wrong: " + strings.Join(wrong, ", "))
	}
	if len(missed) > 0 {
		b.WriteString("; not reached: " + strings.Join(missed, ", "))
	}
	return b.String() + "."
}

// thousands writes n with commas: 12,408.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
