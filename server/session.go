package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolcall-lab/lab/internal/sharedframe"
	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
)

// session is one lab session, named by a UUID.
//
// Ownership: mu guards inbox, draining, heard, gone, conns, watchers, frame, row,
// lastActive and lastOwn; expiring, stored, creator and admitted are guarded
// by Server.mu. The lab, its encoder and the run and rename counts are owned
// by the goroutine that drains the inbox; at most one drains at
// a time (chosen under mu, by the draining flag), so changes apply one at a
// time in arrival order, and frames are handed to connections under mu in
// that same order. requirePredictions is set by the classes code at any
// time and read by the drainer (atomic). No goroutine of its own: whoever
// submits into an idle session, or hears of a change another replica
// stored, drains it. changed is called after every change (and tab count
// change) with no lock held; it tells the instructors' overview.
//
// The lab is a cache of the session's log at some seq n (design: several
// replicas). A change is decided on it and appended as n+1; if another
// replica stored n+1 first, the drainer reads the events after n, applies
// and publishes them as its own, and decides again (apply). A notification
// of a seq beyond n makes the drainer catch up the same way (drain).
type session struct {
	id      string
	limits  model.Limits
	metrics *metrics
	store   store.Store
	shared  bool // other replicas change the store too (it is a Listener)
	now     func() time.Time
	changed func()
	// storeTimeout is Config.StoreTimeout: a change not stored that long
	// after it arrived is refused.
	storeTimeout time.Duration
	// stuckAfter is Config.StuckAfter: no new step for this long flags the
	// session stuck on the progress board.
	stuckAfter time.Duration
	// requirePredictions refuses a student's delivery without a prediction
	// (a class setting; Server.RequirePredictions).
	requirePredictions atomic.Bool

	mu       sync.Mutex
	inbox    []pending
	draining bool
	heard    uint64             // the highest seq another replica told of; the drainer catches up to it
	conns    []*conn            // the student tabs (every change ranges over them: a slice, not a map)
	watchers map[*conn]struct{} // instructor connections watching this session
	frame    *sharedframe.Frame // the encoded state as of the last change; the session holds a reference
	row      sessionRow         // the overview's row, as of the last change; every write of it adds to rowGen
	rowGen   uint64             // counts the writes of row
	rowJSON  encodedRow         // row as the overview last encoded it (tableRow)

	lastActive time.Time // the last change: connections do not extend a session's life
	gone       bool      // the janitor is deleting it: submit refuses
	// lastOwn is the student's own last activity, for the overview: their
	// last change, or the session's creation. An instructor's injection or
	// a tab reconnecting after a restart is not the student acting.
	lastOwn time.Time

	// Guarded by Server.mu.
	expiring bool   // the janitor is deleting it
	admitted int    // connections admitted to it
	stored   bool   // it has changed, so it is stored and counted (Server.reserve)
	creator  string // the client address that made its first change, "" if unknown

	// reserve counts the session as stored before its first change is
	// appended (Server.reserve), on behalf of a client address ("" for an
	// instructor); unreserve undoes it when that append fails.
	reserve   func(s *session, addr string) error
	unreserve func(s *session)
	// renameMember checks and stores a rename with the session's class
	// membership (Server.renameMember), before the rename is appended.
	renameMember func(id, name string) error
	// stale has the session's log read again soon (Server.markStale): a
	// catch-up could not read it.
	stale func(id string)
	caps  eventCaps

	// check asks the Server's checker for a check of the session's code
	// (code.go) in the fair line's group given, earlier hands it earlier
	// ReScript sources for their tasks; group names the group a
	// submission from an address waits in (Server.payer's key); changing
	// tells the checker that the class is making changes (activity.mark),
	// which keeps a core free of checks.
	check    func(s *session, group string, in model.CodeInput)
	earlier  func(s *session, sources []string)
	group    func(id, addr string) string
	changing func()
	rescript bool // the lab has a ReScript compiler
	// codeFailure is the failing trace the last frame shows, and codeIn
	// the input it is of (both guarded by mu).
	codeFailure *model.Failure
	codeIn      model.CodeInput

	lab           *model.Lab   // owned by the current drainer
	enc           stateEncoder // owned by the current drainer
	code          codeState    // owned by the current drainer (code.go)
	runs, renames int          // owned by the current drainer: events of these kinds so far
	clock         stepClock    // owned by the current drainer
}

// pending is a command waiting to be applied, with where its refusal goes.
type pending struct {
	// control, when set, says the pending carries no command but work of
	// the drainer's (see controlKind).
	control controlKind
	code    *checkDone // for a codeResult pending
	cmd     model.Command
	from    *conn          // the connection that sent it, for its error frame; may be nil
	done    chan<- outcome // optional; receives the result (buffered by the caller)
	// deadline is when a command must be stored by (submit sets it,
	// Config.StoreTimeout after it arrived): its wait in the inbox counts,
	// so every change is answered within the deadline however many wait.
	deadline time.Time
}

// controlKind is the drainer's work a pending asks for in place of a
// command. It is not one of the session's changes, so a full inbox does not
// refuse it.
type controlKind uint8

const (
	noControl controlKind = iota
	// refreshState: a new state frame for every tab and watcher (a class
	// setting changed; setRequirePredictions).
	refreshState
	// addWatch: from, an instructor connection, starts watching
	// (session.watch).
	addWatch
	// readTimeline: the session's recent timeline goes to done
	// (recentTimeline).
	readTimeline
	// lookUp: the session catches up with the log, and the outcome goes
	// to done (session.lookUp).
	lookUp
	// codeResult: a code check ended (code, from the checker).
	codeResult
)

// outcome is what became of a pending command: refused with err, or applied,
// leaving notice; delivered says the change delivered a message (so notice
// is the delivery's).
type outcome struct {
	err       error
	notice    string
	delivered bool
	timeline  []timelineEntry // for a readTimeline pending
}

func newSession(id string, cfg *Config, m *metrics, frames *sharedframe.Pool, changed func()) *session {
	now := cfg.Now()
	s := &session{
		id: id, limits: cfg.Limits, metrics: m, store: cfg.Store, shared: isListener(cfg.Store), now: cfg.Now, changed: changed,
		reserve: func(*session, string) error { return nil }, unreserve: func(*session) {},
		renameMember: func(string, string) error { return nil },
		stale:        func(string) {},
		check:        func(*session, string, model.CodeInput) {}, group: func(_, addr string) string { return addr },
		earlier:      func(*session, []string) {},
		changing:     func() {},
		rescript:     cfg.ReScript != nil,
		stuckAfter:   cfg.StuckAfter,
		storeTimeout: orDefault(cfg.StoreTimeout, defaultStoreTimeout),
		caps:         eventCaps{runs: cfg.MaxRuns, renames: cfg.MaxRenames, events: cfg.MaxEvents},
		watchers:     make(map[*conn]struct{}),
		lab:          model.NewLab(), enc: newStateEncoder(id, frames), lastActive: now, lastOwn: now,
		clock: stepClock{began: now.UTC().Truncate(time.Millisecond)},
	}
	frame, v := s.enc.frame(s.lab)
	s.frame = frame
	s.row = newRow(id, v, now)
	s.row.progress = s.clock.progress(v)
	return s
}

// subscribe adds a student tab and hands it the current state, under mu so
// that it sees every later frame after this one.
func (s *session) subscribe(c *conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	c.sendShared(s.frame)
	s.touchTabs()
	s.mu.Unlock()
	s.changed()
}

func (s *session) unsubscribe(c *conn) {
	s.mu.Lock()
	if i := slices.Index(s.conns, c); i >= 0 {
		s.conns = slices.Delete(s.conns, i, i+1)
	}
	s.touchTabs()
	s.mu.Unlock()
	s.changed()
}

// touchTabs records the tab count. A tab opening or closing is not the
// student's activity (a restart reconnects every tab). Called with mu held.
func (s *session) touchTabs() {
	s.row.Tabs = len(s.conns)
	s.rowGen++
}

// watch adds an instructor connection: it gets the state exactly as the
// students get it, then the recent timeline, then both after every change.
// The drainer adds it (addWatcher), between two changes, once it has read
// the timeline from the log.
func (s *session) watch(c *conn) {
	c.watching.Store(s)
	s.submit(pending{control: addWatch, from: c})
}

func (s *session) unwatch(c *conn) {
	c.watching.CompareAndSwap(s, nil) // a watch still waiting adds nothing
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers, c)
}

// addWatcher adds c as a watcher, unless it stopped watching since it
// asked. Called by the drainer.
func (s *session) addWatcher(p pending) {
	entries, err := s.recentChanges()
	if err != nil {
		s.refuse(p, err)
		return
	}
	c := p.from
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.watching.Load() != s {
		return
	}
	s.watchers[c] = struct{}{}
	c.sendShared(s.frame)
	c.sendState(timelineFrame(s.id, true, entries))
}

// sendTimeline answers a readTimeline pending (recentTimeline). Called by the
// drainer.
func (s *session) sendTimeline(p pending) {
	entries, err := s.recentChanges()
	if err != nil {
		s.refuse(p, err)
		return
	}
	p.done <- outcome{timeline: entries}
}

// recentChanges reads the session's last maxTimeline changes from the log.
// The log is the truth: keeping a timeline in memory as well would cost
// every change CPU and every session memory for what few ever read.
// Called by the drainer, whose lab is at the seq its last frame shows.
func (s *session) recentChanges() ([]timelineEntry, error) {
	seq := s.lab.Seq()
	recs, err := s.store.EventsAfter(context.Background(), s.id, seq-min(seq, maxTimeline))
	if err != nil {
		return nil, failed(errCannotRead, "reading a timeline", err)
	}
	return timelineFrom(recs, s.lab), nil
}

// submit queues a command and, if nobody is draining the session, drains it
// in the calling goroutine.
func (s *session) submit(p pending) {
	if p.control == noControl {
		p.deadline = time.Now().Add(s.storeTimeout)
		if p.cmd.Kind != model.SubmitCode {
			s.changing()
		}
	}
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		s.refuse(p, errSessionExpiring)
		return
	}
	if len(s.inbox) >= maxInbox && p.control == noControl {
		s.mu.Unlock()
		s.refuse(p, errSessionBusy)
		return
	}
	s.inbox = append(s.inbox, p)
	if s.draining {
		s.mu.Unlock()
		return
	}
	s.draining = true
	s.mu.Unlock()
	s.drain()
}

// notify tells the session that the log holds seq (another replica's
// change, or a resync's "look": math.MaxUint64) and, if nobody is
// draining it, starts a drainer in drains (the listener's, which waits for
// them when it stops), so that one session's catching up never holds up
// the notifications of others. It never waits in the inbox, so a busy
// session cannot lose it.
func (s *session) notify(seq uint64, drains *sync.WaitGroup) {
	s.mu.Lock()
	s.heard = max(s.heard, seq)
	if s.draining {
		s.mu.Unlock()
		return
	}
	s.draining = true
	s.mu.Unlock()
	drains.Go(s.drain)
}

// drain applies the inbox in order, first catching up with any seq another
// replica told of, until both are done.
func (s *session) drain() {
	for {
		s.mu.Lock()
		if heard := s.heard; heard > s.lab.Seq() {
			s.mu.Unlock()
			err := s.catchUp()
			if err != nil {
				// Not "no events": read again soon (the listener's retry).
				s.stale(s.id)
			}
			s.mu.Lock()
			if s.heard == heard && (err != nil || heard > s.lab.Seq()) {
				// The log had less than we were told (a resync's look), or
				// could not be read: stop here; the retry, the next change
				// or notification tries again, and a change that conflicts
				// catches up on its own.
				s.heard = s.lab.Seq()
			}
			s.mu.Unlock()
			continue
		}
		if len(s.inbox) == 0 {
			s.draining = false
			s.inbox = s.inbox[:0]
			s.mu.Unlock()
			return
		}
		// Taken from the front by moving the rest (at most maxInbox, most
		// often none), so the inbox keeps its array: slicing it off the
		// front cost an allocation per change.
		p := s.inbox[0]
		n := copy(s.inbox, s.inbox[1:])
		s.inbox[n] = pending{}
		s.inbox = s.inbox[:n]
		s.mu.Unlock()
		s.apply(p)
	}
}

// apply decides, stores, applies and publishes one command. It runs outside
// mu: deciding, storing and encoding are the session's work, not the
// connections'. A change is applied only once the store has committed it, so
// no client ever sees a change that a crash could lose; a failed append
// refuses the change and leaves the session as it was.
func (s *session) apply(p pending) {
	switch p.control {
	case refreshState:
		s.republish()
		return
	case addWatch:
		s.addWatcher(p)
		return
	case readTimeline:
		s.sendTimeline(p)
		return
	case codeResult:
		s.takeCodeResult(p.code)
		return
	case lookUp:
		err := s.catchUp()
		if err != nil {
			err = fmt.Errorf("%w: %w", errCannotRead, err)
		}
		p.done <- outcome{err: err}
		return
	}
	if !time.Now().Before(p.deadline) {
		// It waited behind changes the store took the deadline over.
		s.refuse(p, fmt.Errorf("%w: not stored within %v", errCannotSave, s.storeTimeout))
		return
	}
	if p.cmd.Kind == model.SubmitCode {
		if err := s.admitCode(&p); err != nil {
			s.refuse(p, err)
			return
		}
	}
	if p.cmd.Kind == model.Deliver && p.cmd.By == model.Student && p.cmd.Predict == model.NoPrediction && s.requirePredictions.Load() {
		s.refuse(p, errPredictionRequired)
		return
	}
	for conflicts := 0; ; conflicts++ {
		if drawsPractice(p.cmd) {
			p.cmd.Code = s.latestCheck() // its wrong situations join the choice
		}
		ev, err := s.lab.Decide(p.cmd, s.limits)
		if err == nil {
			err = s.caps.check(ev, s.runs, s.renames, s.lab.Seq())
		}
		var notice, run string
		var change model.Change
		if err == nil {
			change, err = s.lab.Prepare(ev)
			notice, run = change.Notice(), change.Run()
		}
		if err != nil {
			// With other replicas a refusal is final only once the
			// session has caught up: the command may name what another
			// replica has just stored (a message queued from a tab there).
			if s.shared && conflicts < maxConflicts {
				seq := s.lab.Seq()
				if s.catchUp() == nil && s.lab.Seq() > seq {
					continue
				}
			}
			s.refuse(p, err)
			return
		}
		oldName := ""
		if ev.Kind == model.Renamed {
			// A class's names stay unique: its membership takes the name
			// first (the door checks names there), or the rename is refused.
			s.mu.Lock()
			oldName = s.row.Name
			s.mu.Unlock()
			if err := s.renameMember(s.id, ev.Name); err != nil {
				s.refuse(p, err)
				return
			}
		}
		first := s.lab.Seq() == 0
		if first {
			addr := ""
			if p.from != nil {
				addr = p.from.remote
			}
			if err := s.reserve(s, addr); err != nil {
				s.undoRename(ev, oldName)
				s.refuse(p, err)
				return
			}
		}
		now := s.now().UTC().Truncate(time.Millisecond)
		rec := store.Record{Session: s.id, Seq: s.lab.Seq() + 1, Time: now, Event: ev, Run: run, Notice: notice}
		started := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), p.deadline)
		err = s.store.Append(ctx, rec)
		cancel()
		s.metrics.appendLatency.Observe(time.Since(started).Seconds())
		if errors.Is(err, store.ErrSeqTaken) {
			// Another replica stored this seq: the session is stored (a
			// first change keeps its reservation), and the command is
			// decided again on the caught-up state.
			s.metrics.seqConflicts.Inc()
			if conflicts == maxConflicts {
				s.refuse(p, errSessionBusy)
				return
			}
			if err := s.catchUp(); err != nil {
				s.refuse(p, failed(errCannotSave, "storing a change", err))
				return
			}
			continue
		}
		if err != nil {
			// A deadline that passed with the append under way leaves its
			// outcome unknown: the database may have committed it and lost
			// the reply (PostgreSQL refuses to commit past the deadline,
			// but not a commit already made). The change is refused all the
			// same, and if the record is in the log after all it is applied
			// as another replica's would be, so every tab, this one
			// included, is shown the change: with other replicas, its
			// commit's notification (or the listener's resync, if that was
			// lost too) has the session catch up, off this goroutine, which
			// is often the tab's reader; with a store of its own, the
			// drainer reads the log before the next change. The next
			// change would find its seq taken and catch up in any case.
			unknown := errors.Is(err, context.DeadlineExceeded)
			if first {
				s.unreserve(s) // and catchUp reserves again if it was stored
			}
			if !unknown {
				s.undoRename(ev, oldName)
			}
			s.refuse(p, failed(errCannotSave, "storing a change", err))
			if unknown && !s.shared {
				s.mu.Lock()
				s.heard = max(s.heard, rec.Seq)
				s.mu.Unlock()
			}
			return
		}
		if err := s.lab.Commit(change); err != nil {
			// Prepared at this very seq, so this cannot happen; the stored
			// record would then disagree with the session, which a restart
			// resolves.
			s.refuse(p, fmt.Errorf("applying a stored event: %w", err))
			return
		}
		delivered := ev.Kind == model.MessageDelivered || ev.Kind == model.MessageInjected && ev.Deliver
		if delivered {
			s.metrics.delivered(notice)
		}
		if ev.Kind == model.MessageInjected {
			s.metrics.injections.WithLabelValues(injectMode(ev.Deliver)).Inc()
		}
		s.publish(ev, notice, now)
		if p.done != nil {
			p.done <- outcome{notice: notice, delivered: delivered}
		}
		return
	}
}

// maxConflicts bounds how often one change is decided again after another
// replica took its seq (or stored what a refusal may have missed); past it
// the change is refused as busy. Each retry first catches up, so only a
// session changed on other replicas faster than one round trip to the
// database runs out.
const maxConflicts = 32

// catchUp reads the events other replicas stored after the lab's seq and
// applies them, exactly as if decided here, then publishes the state after
// the last one: a tab gets the newest state, never a run of frames it
// would have to wade through (or its outbox drop), and watchers get every
// event's timeline entry, in order. A session made here in memory that
// another replica stored first becomes stored here too. Only the drainer
// calls it.
func (s *session) catchUp() error {
	recs, err := s.store.EventsAfter(context.Background(), s.id, s.lab.Seq())
	if err != nil {
		return fmt.Errorf("catching up session %s: %w", s.id, err)
	}
	if len(recs) == 0 {
		return nil
	}
	if s.lab.Seq() == 0 {
		// Counted as stored; past the cap it is held all the same, since
		// the log has it.
		_ = s.reserve(s, "")
	}
	s.mu.Lock()
	watched := len(s.watchers) > 0 // only the drainer adds watchers
	s.mu.Unlock()
	var entries []timelineEntry
	var own, last time.Time
	applied := false
	for _, r := range recs {
		if r.Seq != s.lab.Seq()+1 {
			err = fmt.Errorf("catching up session %s: stored seq %d follows seq %d", s.id, r.Seq, s.lab.Seq())
			break
		}
		if _, err = s.lab.Apply(r.Event); err != nil {
			err = fmt.Errorf("catching up session %s: applying seq %d: %w", s.id, r.Seq, err)
			break
		}
		s.metrics.replicaEvents.Inc()
		s.advance(r.Event, r.Time)
		if r.Event.By == model.Student {
			own = r.Time
		}
		if watched {
			entries = append(entries, newTimelineEntry(r.Event, r.Seq, s.lab, r.Notice, r.Time))
		}
		last, applied = r.Time, true
	}
	if applied {
		s.broadcast(last, own, func() []timelineEntry { return entries })
	}
	return err
}

// publish counts ev, moves the step clock, and hands the state after ev,
// and its timeline entry, to every tab and watcher, and tells the
// overview. Only the drainer calls it, right after applying ev (decided
// here).
func (s *session) publish(ev model.Event, notice string, now time.Time) {
	s.advance(ev, now)
	var own time.Time
	if ev.By == model.Student {
		own = now
	}
	s.broadcast(now, own, func() []timelineEntry {
		return []timelineEntry{newTimelineEntry(ev, s.lab.Seq(), s.lab, notice, now)}
	})
}

// advance counts ev, just applied at now, and moves the step clock. Called
// by the drainer.
func (s *session) advance(ev model.Event, now time.Time) {
	s.count(ev)
	if s.lab.Seq() == 1 {
		// A session begins with its first event, as the store dates it,
		// so that a restart agrees on the time on the current step.
		s.clock.began = now
	}
	s.clock.steps(s.lab.Exercise(), s.lab.Seq(), now)
	s.codeChanged(ev)
}

// broadcast hands the state the lab is at, changed last at now (by the
// student at own, unless zero), to every tab and watcher, with the
// timeline entries entries makes (called only when someone watches), and
// tells the overview. Called by the drainer.
func (s *session) broadcast(now, own time.Time, entries func() []timelineEntry) {
	s.enc.predictionsRequired, s.enc.code = s.requirePredictions.Load(), s.code.json
	v := s.enc.encode(s.lab)
	s.clock.receipts(v.Receipts)
	prog := s.clock.progress(v)
	s.mu.Lock()
	old := s.nextFrame()
	frame := s.frame
	s.lastActive = now
	if !own.IsZero() {
		s.lastOwn = own
	}
	s.row = newRow(s.id, v, s.lastOwn)
	s.row.progress = prog
	s.row.Tabs = len(s.conns)
	s.publishCode()
	s.rowGen++
	for _, c := range s.conns {
		c.sendShared(frame)
	}
	if len(s.watchers) > 0 {
		// Encoded only when someone watches, under mu so that it goes out
		// in the same order as the state.
		delta := timelineFrame(s.id, false, entries())
		for c := range s.watchers {
			c.sendShared(frame)
			c.sendState(delta)
		}
	}
	s.mu.Unlock()
	if old != nil {
		old.Release()
	}
	s.changed()
}

// setRequirePredictions sets the class setting for this session; a change
// goes through the inbox (so the drainer, who owns the encoder, re-encodes)
// and reaches every tab and watcher as a new state frame.
func (s *session) setRequirePredictions(on bool) {
	if s.requirePredictions.Swap(on) != on {
		s.submit(pending{control: refreshState})
	}
}

// republish encodes the state again, unchanged but for the settings it
// carries, and hands it to every tab and watcher. Called by the drainer.
func (s *session) republish() {
	s.enc.predictionsRequired, s.enc.code = s.requirePredictions.Load(), s.code.json
	s.enc.encode(s.lab)
	s.mu.Lock()
	old := s.nextFrame()
	s.publishCode()
	s.rowGen++
	for _, c := range s.conns {
		c.sendShared(s.frame)
	}
	for c := range s.watchers {
		c.sendShared(s.frame)
	}
	s.mu.Unlock()
	if old != nil {
		old.Release()
	}
}

// nextFrame makes the state just encoded the session's frame: the frame
// itself, rewritten, when no tab or watcher still holds it (so a change
// copies only what it adds), else a new one. A new one copies the whole
// state, so it is made with mu released; that is safe, since only the
// drainer changes s.frame. Called by the drainer with mu held, and returns
// with it held; the frame replaced, if any, is returned for the caller to
// release once mu is, nil if it was rewritten.
func (s *session) nextFrame() (old *sharedframe.Frame) {
	if s.enc.rewrite(s.frame) {
		return nil
	}
	s.mu.Unlock()
	f := s.enc.fresh()
	s.mu.Lock()
	old, s.frame = s.frame, f
	return old
}

// undoRename gives the class membership its old name back when a rename
// it took was not stored after all (best effort: a failed undo leaves the
// new name taken in the class until the next rename).
func (s *session) undoRename(ev model.Event, old string) {
	if ev.Kind == model.Renamed && old != "" {
		_ = s.renameMember(s.id, old)
	}
}

// count adds ev to the run and rename counts (eventCaps). Called by the
// drainer, and by restoreSession for the stored events.
func (s *session) count(ev model.Event) {
	switch {
	case ev.Kind == model.RunStarted, ev.Kind == model.PracticeDrawn && ev.Practice.NewRun:
		s.runs++
	case ev.Kind == model.Renamed:
		s.renames++
	}
}

// idle reports whether no change waits or is being applied.
func (s *session) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.draining && len(s.inbox) == 0
}

// refuse sends err to whoever sent p: an error frame to its connection, the
// error to its waiter.
func (s *session) refuse(p pending, err error) {
	if p.from != nil {
		p.from.sendError(err)
	}
	if p.done != nil {
		p.done <- outcome{err: err}
	}
}

// snapshot returns a copy of the current state frame.
func (s *session) snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frame.Data)
}

// overviewRow returns the session's row of the class overview, with its
// stuck flag as of now.
func (s *session) overviewRow() sessionRow {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.row
	r.Stuck = r.stuckAt(now, s.stuckAfter)
	return r
}

// encodedRow is a row's JSON in class's table, as of the row's write gen
// and with its stuck flag as it was then (the one field that changes with
// the clock alone).
type encodedRow struct {
	gen   uint64
	class string
	stuck bool
	json  []byte
}

// tableRow is the session's overview row in class's table and its JSON,
// encoded again only when the row has changed since the last table: a
// course of 2,000 students changes a quarter of its rows between two
// tables (BENCHMARKS.md, issue 35). Encoded outside mu; kept only if no
// change came meanwhile.
func (s *session) tableRow(class string) (sessionRow, []byte) {
	now := s.now()
	s.mu.Lock()
	r, gen, enc := s.row, s.rowGen, s.rowJSON
	s.mu.Unlock()
	r.Stuck = r.stuckAt(now, s.stuckAfter)
	r.Class = class
	if enc.json != nil && enc.gen == gen && enc.class == class && enc.stuck == r.Stuck {
		return r, enc.json
	}
	b := mustJSON(r)
	s.mu.Lock()
	if s.rowGen == gen {
		s.rowJSON = encodedRow{gen: gen, class: class, stuck: r.Stuck, json: b}
	}
	s.mu.Unlock()
	return r, b
}

// recentTimeline returns the session's last maxTimeline changes, oldest
// first, read from the log between two changes. The whole log is the
// export (export.go). Not to be called by a drainer.
func (s *session) recentTimeline() ([]timelineEntry, error) {
	done := make(chan outcome, 1)
	s.submit(pending{control: readTimeline, done: done})
	o := <-done
	return o.timeline, o.err
}

// lookUp has the session catch up with the log before a tab opens on it,
// with other replicas: this replica's copy may be behind the state the tab
// showed on another replica, and a tab is never shown an older seq than it
// had. An error (errCannotRead) means the log could not be read. Not to be
// called by a drainer.
func (s *session) lookUp() error {
	done := make(chan outcome, 1)
	s.submit(pending{control: lookUp, done: done})
	return (<-done).err
}

func injectMode(deliver bool) string {
	if deliver {
		return "deliver"
	}
	return "hold"
}
