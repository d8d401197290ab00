package fair

import (
	"fmt"
	"slices"
	"testing"
)

// drain takes every job in line, ending each at once, and says whose each
// was, in order (with its job, "member:job", when jobs is set).
func drain(q *Queue[string, int], jobs bool) []string {
	var out []string
	for {
		m, j, ok := q.Take()
		if !ok {
			return out
		}
		q.Done(m)
		if jobs {
			m = fmt.Sprintf("%s:%d", m, j)
		}
		out = append(out, m)
	}
}

// TestGroupsTakeTurns: a group with many members and one with few get one
// turn each while both wait; the flood's members keep their own order.
func TestGroupsTakeTurns(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	for i := range 5 {
		q.Put("flood", fmt.Sprintf("f%d", i), i)
	}
	q.Put("class", "c0", 0)
	q.Put("class", "c1", 1)
	got := drain(q, false)
	want := []string{"f0", "c0", "f1", "c1", "f2", "f3", "f4"}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	if q.Len() != 0 || q.Groups() != 0 || len(q.members) != 0 {
		t.Fatalf("after the line emptied: %d in line, %d groups, %d members", q.Len(), q.Groups(), len(q.members))
	}
}

// TestLateGroupWaitsOneJobAGroup: a group that joins while three others
// flood waits at most one job of each of them, however long their lines.
func TestLateGroupWaitsOneJobAGroup(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	for _, g := range []string{"a", "b", "c"} {
		for i := range 50 {
			q.Put(g, fmt.Sprintf("%s%d", g, i), i)
		}
	}
	for range 7 { // some of the flood served already
		m, _, _ := q.Take()
		q.Done(m)
	}
	q.Put("lone", "me", 1)
	for n := 0; ; n++ {
		m, _, ok := q.Take()
		if !ok {
			t.Fatal("the lone job was never served")
		}
		q.Done(m)
		if m == "me" {
			if n > 3 {
				t.Fatalf("the lone group waited %d jobs behind three groups", n)
			}
			return
		}
	}
}

// TestMembersOfAGroupTakeTurns: inside a group a member that resubmits
// whenever its job ends goes behind the others that wait.
func TestMembersOfAGroupTakeTurns(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	q.Put("hall", "eager", 0)
	q.Put("hall", "b", 0)
	q.Put("hall", "c", 0)
	var got []string
	for range 6 {
		m, _, ok := q.Take()
		if !ok {
			break
		}
		got = append(got, m)
		if m == "eager" {
			if p := q.Put("hall", "eager", 1); p != Aside {
				t.Fatalf("a running member's new job: %v, want Aside", p)
			}
		}
		q.Done(m)
	}
	want := []string{"eager", "b", "c", "eager", "eager", "eager"} // alone, it gets every turn
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
}

// TestNewerJobReplacesInPlace: a member in line holds one job, the newest,
// in the place it first took; the line never grows past its members.
func TestNewerJobReplacesInPlace(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	if p := q.Put("a", "x", 1); p != Queued {
		t.Fatalf("first put: %v", p)
	}
	q.Put("a", "y", 1)
	for i := 2; i <= 100; i++ {
		if p := q.Put("a", "x", i); p != Replaced {
			t.Fatalf("put %d: %v, want Replaced", i, p)
		}
	}
	if q.Len() != 2 {
		t.Fatalf("%d in line for two members", q.Len())
	}
	if j, ok := q.Waiting("x"); !ok || j != 100 {
		t.Fatalf("x waits with %d, %v; want 100", j, ok)
	}
	m, j, _ := q.Take()
	if m != "x" || j != 100 {
		t.Fatalf("took %s's %d, want x's newest (100) first", m, j)
	}
	if !q.Running("x") || q.Running("y") {
		t.Fatal("running: x should be, y not")
	}
	// Aside, replaced while running; joins at Done with the newest.
	q.Put("a", "x", 101)
	q.Put("a", "x", 102)
	if q.Len() != 1 {
		t.Fatalf("an aside job counted in line: %d", q.Len())
	}
	q.Done("x")
	if got := drain(q, true); !slices.Equal(got, []string{"y:1", "x:102"}) {
		t.Fatalf("served %v", got)
	}
}

// TestRemove: a removed job leaves the line and its group the turn; a
// running member's aside job is dropped, the running one is not.
func TestRemove(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	q.Put("a", "a1", 1)
	q.Put("b", "b1", 1)
	q.Put("a", "a2", 1)
	q.Remove("a1")
	q.Remove("a2")
	q.Remove("nobody")
	if m, _, _ := q.Peek(); m != "b1" {
		t.Fatalf("peek %q after a's jobs were removed", m)
	}
	m, _, _ := q.Take()
	q.Put("b", m, 2) // aside
	q.Remove(m)
	q.Done(m)
	if q.Len() != 0 || q.Groups() != 0 || len(q.members) != 0 {
		t.Fatalf("left: %d in line, %d groups, %d members", q.Len(), q.Groups(), len(q.members))
	}
}

// TestStop: stopping drops what waits, in line and aside, and every later
// job; a running job is still ended by Done.
func TestStop(t *testing.T) {
	t.Parallel()
	q := New[string, int]()
	q.Put("a", "run", 1)
	q.Put("a", "wait", 1)
	q.Take()
	q.Put("a", "run", 2)
	q.Stop()
	if q.Len() != 0 {
		t.Fatalf("%d in line after Stop", q.Len())
	}
	if _, ok := q.Waiting("run"); ok {
		t.Fatal("an aside job kept after Stop")
	}
	if p := q.Put("b", "new", 1); p != Stopped {
		t.Fatalf("put after Stop: %v", p)
	}
	if _, _, ok := q.Take(); ok {
		t.Fatal("a job taken after Stop")
	}
	q.Done("run")
	if q.Groups() != 0 || len(q.members) != 0 {
		t.Fatalf("left after the running job ended: %d groups, %d members", q.Groups(), len(q.members))
	}
}

// FuzzQueue plays random operations against the rules: each member in
// line once, Len the members in line, Peek what Take takes, and a group
// that enters the turn is served before more jobs than there were groups
// ahead of it.
func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba})
	f.Fuzz(func(t *testing.T, ops []byte) {
		q := New[int, int]()
		group := func(m int) string { return fmt.Sprint(m % 3) }
		ahead := map[string]int{} // jobs each group in turn may still wait
		for i, op := range ops {
			m := int(op>>4) % 8
			switch op & 7 {
			case 0, 1, 2:
				q.Put(group(m), m, i)
			case 3, 4:
				pm, pj, pok := q.Peek()
				tm, tj, tok := q.Take()
				if pm != tm || pj != tj || pok != tok {
					t.Fatalf("peeked %d:%d:%v, took %d:%d:%v", pm, pj, pok, tm, tj, tok)
				}
				if tok {
					served := group(tm)
					for g := range ahead {
						if g == served {
							delete(ahead, g)
						} else if ahead[g]--; ahead[g] < 0 {
							t.Fatalf("group %s waited past its turn", g)
						}
					}
				}
			case 5:
				q.Done(m)
			case 6:
				q.Remove(m)
			case 7:
				if j, ok := q.Waiting(m); ok && q.Running(m) && j < 0 {
					t.Fatal("impossible job")
				}
			}
			n := 0
			seen := map[int]bool{}
			inTurn := map[string]bool{}
			for pos, g := range q.turn {
				if len(g.line) == 0 || !g.inTurn {
					t.Fatalf("group %s in turn with an empty line", g.name)
				}
				inTurn[g.name] = true
				if _, ok := ahead[g.name]; !ok {
					ahead[g.name] = pos
				}
				for _, e := range g.line {
					if seen[e.key] || e.running || !e.has {
						t.Fatalf("member %d in line twice, running or without a job", e.key)
					}
					seen[e.key] = true
					n++
				}
			}
			for g := range ahead {
				if !inTurn[g] {
					delete(ahead, g)
				}
			}
			if n != q.Len() {
				t.Fatalf("Len %d, %d in line", q.Len(), n)
			}
			if len(q.members) > 8 {
				t.Fatalf("%d members for 8 keys", len(q.members))
			}
		}
	})
}
