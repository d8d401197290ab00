package limit

import (
	"fmt"
	"testing"
	"time"
)

func testAddrs(maxEntries int) *AddrTable {
	return NewAddrTable(AddrConfig{
		ConnRate: 1, ConnBurst: 3,
		AuthEvery: time.Second, AuthBurst: 2,
		JoinRate: 1, JoinBurst: 4,
		MissRate: 0.5, MissBurst: 2,
		PlayRate: 0.5, PlayBurst: 2,
		MaxEntries: maxEntries,
	})
}

// TestAddrTableCounts: open connections and sessions are counted per
// address up to the cap each call names, and one address's count never
// touches another's.
func TestAddrTableCounts(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	for i := range 2 {
		if !a.Enter("a", 2) {
			t.Fatalf("connection %d refused under the cap", i+1)
		}
	}
	if a.Enter("a", 2) {
		t.Fatal("a third connection let in at a cap of 2")
	}
	if !a.Enter("b", 2) {
		t.Fatal("another address refused for the first one's connections")
	}
	a.Leave("a")
	if !a.Enter("a", 2) {
		t.Fatal("a connection refused after one left")
	}

	if !a.AddSession("a", 1) || a.AddSession("a", 1) {
		t.Fatal("sessions not counted up to a cap of 1")
	}
	if !a.AddSession("b", 1) {
		t.Fatal("another address refused for the first one's session")
	}
	a.DropSession("a")
	if !a.AddSession("a", 1) {
		t.Fatal("a session refused after one was dropped")
	}
}

// TestAddrTableAllowances: new connections, wrong credentials and join
// attempts each have a burst per address; misses use up joining too.
func TestAddrTableAllowances(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	for i := range 3 {
		if !a.AllowNew(Addr("a")) {
			t.Fatalf("new connection %d refused within the burst of 3", i+1)
		}
	}
	if a.AllowNew(Addr("a")) || !a.AllowNew(Addr("b")) {
		t.Fatal("new connections: the burst is not per address")
	}

	for range 2 {
		if !a.AuthAllowed("a") {
			t.Fatal("credentials refused before any was wrong twice")
		}
		a.AuthFailed("a")
	}
	if a.AuthAllowed("a") || !a.AuthAllowed("b") {
		t.Fatal("wrong credentials: the allowance is not per address")
	}

	if !a.MayKnock("a") {
		t.Fatal("a first knock refused")
	}
	a.JoinMissed("a")
	a.JoinMissed("a")
	if a.MayKnock("a") || !a.MayKnock("b") {
		t.Fatal("knocks: the misses are not per address")
	}
	for i := range 4 {
		if !a.AllowJoin(Addr("b")) {
			t.Fatalf("join %d refused within the burst of 4", i+1)
		}
	}
	if a.AllowJoin(Addr("b")) {
		t.Fatal("a fifth join let through at a burst of 4")
	}
}

// TestAddrTablePrune: an address is forgotten only once it holds nothing
// and its allowances are full again; past MaxEntries a new address makes
// room at once.
func TestAddrTablePrune(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	a.Enter("conn", 5)
	a.AddSession("session", 5)
	a.AuthFailed("spent")
	a.AuthAllowed("idle")
	a.Prune(time.Now())
	if _, ok := a.m["idle"]; ok || len(a.m) != 3 {
		t.Fatalf("after a prune now, the table holds %v; want conn, session and spent", keys(a))
	}
	a.Prune(time.Now().Add(time.Hour))
	if len(a.m) != 2 {
		t.Fatalf("after a prune an hour on, the table holds %v; want conn and session", keys(a))
	}
	a.Leave("conn")
	a.DropSession("session")
	a.Prune(time.Now().Add(time.Hour))
	if len(a.m) != 0 {
		t.Fatalf("after they let go, the table holds %v", keys(a))
	}

	small := testAddrs(10)
	for i := range 25 {
		small.AuthAllowed(fmt.Sprint(i)) // remembered, idle
	}
	if len(small.m) > 10 {
		t.Fatalf("%d addresses remembered at MaxEntries 10", len(small.m))
	}
}

func keys(a *AddrTable) []string {
	var out []string
	for k := range a.m {
		out = append(out, k)
	}
	return out
}

// TestAddrTablePlays: a payer's allowance of plays runs out at its burst,
// is its own, and says how long until the next.
func TestAddrTablePlays(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	for i := range 2 {
		if ok, _ := a.AllowPlay(Addr("a")); !ok {
			t.Fatalf("play %d refused within the burst", i+1)
		}
	}
	ok, wait := a.AllowPlay(Addr("a"))
	if ok || wait < time.Second || wait > 3*time.Second {
		t.Fatalf("a third play at once: allowed %v, wait %v; want refused, about 2 s (0.5 a second)", ok, wait)
	}
	if ok, _ := a.AllowPlay(Addr("b")); !ok {
		t.Fatal("another address's play was refused")
	}
}

// TestAddrTableScale: a payer that stands for n people (a class) gets n
// times a lone address's rates and bursts, from its first use and as it
// grows, and an address beside it keeps its own.
func TestAddrTableScale(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	class := Who{Key: "class x", Scale: 5}
	for i := range 5 * 4 {
		if !a.AllowJoin(class) {
			t.Fatalf("join %d of a class of 5 refused within 5 × the burst of 4", i+1)
		}
	}
	if a.AllowJoin(class) {
		t.Fatal("a class of 5 joined past 5 × the burst of 4")
	}
	for i := range 3 {
		if !a.AllowNew(Who{Key: "class x", Scale: 1}) {
			t.Fatalf("new connection %d refused", i+1)
		}
	}
	// Shrunk to one member, spent; grown to 3: the two new members bring
	// their bursts (2 × 3), not the first one's again.
	grown := Who{Key: "class x", Scale: 3}
	for i := range 6 {
		if !a.AllowNew(grown) {
			t.Fatalf("connection %d of the two new members refused", i+1)
		}
	}
	if a.AllowNew(grown) {
		t.Fatal("a class's spent tokens came back when it grew")
	}
	for i := range 3 {
		if !a.AllowNew(Addr("lone")) {
			t.Fatalf("a lone address's connection %d refused beside the class", i+1)
		}
	}
	if a.AllowNew(Addr("lone")) {
		t.Fatal("a lone address got a class's scale")
	}
}
