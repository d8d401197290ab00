package sqlite

import (
	"bytes"
	"testing"

	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// FuzzJournalRecords: whatever a journal file holds after its header, or
// a chunk in the database (a torn write, damage, another program's bytes),
// decodeRecords neither panics nor claims more than it read, and the
// records it returns frame back to exactly the bytes it consumed.
func FuzzJournalRecords(f *testing.F) {
	var whole []byte
	for seq := uint64(1); seq <= 4; seq++ {
		w, err := store.Encode(storetest.Walkthrough("a", seq))
		if err != nil {
			f.Fatal(err)
		}
		whole = appendRecord(whole, &w)
	}
	f.Add(whole)
	f.Add(whole[:len(whole)-3])                  // torn
	f.Add(append(bytes.Clone(whole[:20]), 0xff)) // damaged
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, n := decodeRecords(data)
		if n < 0 || n > int64(len(data)) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		var again []byte
		for _, w := range rows {
			again = appendRecord(again, w)
		}
		if !bytes.Equal(again, data[:n]) {
			t.Fatalf("%d records re-framed to %d bytes, want the %d consumed", len(rows), len(again), n)
		}
	})
}
