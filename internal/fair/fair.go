// Package fair is a line of jobs served fairly: across groups (client
// addresses) in turn, and inside a group across its members (sessions) in
// turn. Each member has at most one job in line, and a newer one replaces
// it in its place, so the line is bounded by the members, not by how often
// they ask. A group alone gets every turn; when several want one, a group
// that joins waits at most one job of each other group, however many
// members those have. The server feeds it and owns the workers that take
// from it (server/code.go's checker).
package fair

// Placed says what Put did with a job.
type Placed int

const (
	// Queued: the member joined the back of its group's line.
	Queued Placed = iota
	// Replaced: the member was in line; the new job took its old one's
	// place.
	Replaced
	// Aside: the member's job is being done; the new one waits aside
	// (replacing any that waited there) and joins the line at Done.
	Aside
	// Stopped: the line was stopped (Stop); the job was dropped.
	Stopped
)

// Queue is the line. Its zero value is not ready: use New. It is not safe
// for concurrent use: its owner guards it (the checker's mutex), so that a
// Peek and the Take after it see the same line.
type Queue[M comparable, J any] struct {
	members map[M]*member[M, J]
	groups  map[string]*group[M, J]
	// turn is the groups with a member in line, in the order they get
	// their turn: Take serves the first and moves it to the back.
	turn    []*group[M, J]
	n       int // members in line
	stopped bool
}

type group[M comparable, J any] struct {
	name    string
	line    []*member[M, J] // members in line, first served first
	members int             // members in line, running or aside: the group is forgotten at 0
	inTurn  bool
}

type member[M comparable, J any] struct {
	key     M
	g       *group[M, J]
	job     J
	has     bool // job is in line (or aside, while running)
	running bool
}

// New returns an empty line.
func New[M comparable, J any]() *Queue[M, J] {
	return &Queue[M, J]{members: make(map[M]*member[M, J]), groups: make(map[string]*group[M, J])}
}

// Put puts m's job j in line in group g. A member keeps the group it first
// came with until it leaves the line (Done with nothing aside, or Remove).
func (q *Queue[M, J]) Put(g string, m M, j J) Placed {
	e := q.members[m]
	switch {
	case q.stopped:
		return Stopped
	case e == nil:
		gr := q.groups[g]
		if gr == nil {
			gr = &group[M, J]{name: g}
			q.groups[g] = gr
		}
		e = &member[M, J]{key: m, g: gr}
		gr.members++
		q.members[m] = e
	case e.running:
		e.job, e.has = j, true
		return Aside
	case e.has:
		e.job = j
		return Replaced
	}
	e.job, e.has = j, true
	q.enter(e)
	return Queued
}

// enter puts e at the back of its group's line, and its group in turn.
func (q *Queue[M, J]) enter(e *member[M, J]) {
	g := e.g
	g.line = append(g.line, e)
	q.n++
	if !g.inTurn {
		g.inTurn = true
		q.turn = append(q.turn, g)
	}
}

// Peek is the job Take would take, without taking it.
func (q *Queue[M, J]) Peek() (m M, j J, ok bool) {
	if len(q.turn) == 0 {
		return m, j, false
	}
	e := q.turn[0].line[0]
	return e.key, e.job, true
}

// Take takes the next job: the first member of the group whose turn it
// is. The member is running until Done; its group goes to the back of the
// turn if more of its members wait.
func (q *Queue[M, J]) Take() (m M, j J, ok bool) {
	if len(q.turn) == 0 {
		return m, j, false
	}
	g := q.turn[0]
	e := g.line[0]
	g.line[0] = nil
	g.line = g.line[1:]
	q.turn[0] = nil
	q.turn = q.turn[1:]
	if len(g.line) > 0 {
		q.turn = append(q.turn, g)
	} else {
		g.inTurn = false
		g.line = nil // let the backing array go
	}
	q.n--
	e.running = true
	j, e.job, e.has = e.job, *new(J), false
	return e.key, j, true
}

// Done ends m's running job: a job it put meanwhile joins the back of its
// group's line; else m leaves.
func (q *Queue[M, J]) Done(m M) {
	e := q.members[m]
	if e == nil || !e.running {
		return
	}
	e.running = false
	if e.has {
		q.enter(e)
		return
	}
	q.forget(e)
}

// Remove drops m's waiting job (in line or aside); a running job is the
// caller's to end (Done).
func (q *Queue[M, J]) Remove(m M) {
	e := q.members[m]
	if e == nil || !e.has {
		return
	}
	e.job, e.has = *new(J), false
	if e.running {
		return
	}
	g := e.g
	for i, x := range g.line {
		if x == e {
			g.line = append(g.line[:i], g.line[i+1:]...)
			break
		}
	}
	q.n--
	if len(g.line) == 0 && g.inTurn {
		g.inTurn = false
		for i, x := range q.turn {
			if x == g {
				q.turn = append(q.turn[:i], q.turn[i+1:]...)
				break
			}
		}
	}
	q.forget(e)
}

// forget drops e, and its group with its last member.
func (q *Queue[M, J]) forget(e *member[M, J]) {
	delete(q.members, e.key)
	if e.g.members--; e.g.members == 0 {
		delete(q.groups, e.g.name)
	}
}

// Waiting says whether m has a job in line or aside, and which.
func (q *Queue[M, J]) Waiting(m M) (j J, ok bool) {
	if e := q.members[m]; e != nil && e.has {
		return e.job, true
	}
	return j, false
}

// Running says whether m's job is being done.
func (q *Queue[M, J]) Running(m M) bool {
	e := q.members[m]
	return e != nil && e.running
}

// Len is the jobs in line (not those aside).
func (q *Queue[M, J]) Len() int { return q.n }

// Groups is the groups with a job in line or running.
func (q *Queue[M, J]) Groups() int { return len(q.groups) }

// Stop drops every waiting job, and every job put from now on; running
// ones stay the caller's to Done.
func (q *Queue[M, J]) Stop() {
	q.stopped = true
	for _, e := range q.members {
		if e.has {
			q.Remove(e.key)
		}
	}
}
