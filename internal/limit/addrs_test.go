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
		CodeRate: 0.5, CodeBurst: 2,
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
		if !a.AllowNew("a") {
			t.Fatalf("new connection %d refused within the burst of 3", i+1)
		}
	}
	if a.AllowNew("a") || !a.AllowNew("b") {
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

	if !a.AllowJoin("a") {
		t.Fatal("a first join refused")
	}
	a.JoinMissed("a")
	a.JoinMissed("a")
	if a.AllowJoin("a") {
		t.Fatal("a join let through after the misses were used up")
	}
	for i := range 4 {
		if !a.AllowJoin("b") {
			t.Fatalf("join %d refused within the burst of 4", i+1)
		}
	}
	if a.AllowJoin("b") {
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

// TestAddrTableCodes: an address's allowance of code submissions runs out
// at its burst and is its own.
func TestAddrTableCodes(t *testing.T) {
	t.Parallel()
	a := testAddrs(100)
	for i := range 2 {
		if !a.AllowCode("a") {
			t.Fatalf("submission %d refused within the burst", i+1)
		}
	}
	if a.AllowCode("a") {
		t.Fatal("a third submission at once was allowed past a burst of 2")
	}
	if !a.AllowCode("b") {
		t.Fatal("another address's submission was refused")
	}
}
