package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

// appendLog is the cgo-free alternative that issue 14 asks to measure
// before SQLite is replaced (BENCHMARKS.md, "A log of our own"). It is a
// prototype for BenchmarkAppendSerial and BenchmarkAppendLoops, not a
// store: it appends, and does nothing else. Each record is written as a
// length, a CRC-32 and the record's fields into one file with write(2), no
// fsync: like SQLite's log at synchronous=NORMAL, a record whose write has
// returned survives kill -9, and a torn last record (the process killed
// mid-write, unacknowledged) fails its CRC and is cut. Group commit is
// SQLite's: the first appender that finds no write running writes all the
// records queued in one call; the others wait for it. Each session's last
// seq stays in memory so that a wrong seq is refused. What it leaves out
// (reads, exports, classes, deletes, compaction, migrations) it would
// also have to pay for.
type appendLog struct {
	f    *os.File
	mu   sync.Mutex
	done sync.Cond // signalled when a write ends
	// queued holds the records of generation next, written by the next
	// write; spare is the buffer of the write before it, to reuse.
	queued, spare []byte
	next, written uint64 // the generation queued; writes completed
	writing       bool
	err           error // the last write's, for its generation's appenders
	seqs          map[string]uint64
}

func openAppendLog(path string) (*appendLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	l := &appendLog{f: f, seqs: make(map[string]uint64)}
	l.done.L = &l.mu
	return l, nil
}

func (l *appendLog) Close() error { return l.f.Close() }

func (l *appendLog) Append(_ context.Context, r store.Record) error {
	w, err := store.Encode(r)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last := l.seqs[w.Session]; uint64(w.Seq) != last+1 {
		return fmt.Errorf("seq %d, want %d", w.Seq, last+1)
	}
	l.seqs[w.Session] = uint64(w.Seq)
	l.queued = appendLogRecord(l.queued, &w)
	gen := l.next
	for l.written <= gen {
		if l.writing {
			l.done.Wait()
			continue
		}
		batch := l.queued
		l.queued, l.spare = l.spare[:0], nil
		l.next++
		l.writing = true
		l.mu.Unlock()
		_, err := l.f.Write(batch)
		l.mu.Lock()
		l.spare, l.err = batch, err
		l.written++
		l.writing = false
		l.done.Broadcast()
	}
	return l.err
}

// appendLogRecord frames one row: its length, its CRC-32, then each field
// (numbers as varints, text as a length and its bytes).
func appendLogRecord(b []byte, w *store.Row) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // length and CRC, filled in below
	for _, n := range []int64{w.Seq, w.TimeMs, w.Message} {
		b = binary.AppendVarint(b, n)
	}
	for _, s := range []string{w.Session, w.Actor, w.Kind, w.MsgKind, w.MsgFrom, w.KeyRun, w.KeyCall, w.Run, w.Notice, w.Prediction} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Raw)))
	b = append(b, w.Raw...)
	body := b[start+8:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.ChecksumIEEE(body))
	return b
}

// TestAppendLog: the prototype refuses a wrong seq and writes every
// record it acknowledges, framed so that a reader can check it.
func TestAppendLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := openAppendLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("session-%d", g)
			for seq := uint64(1); seq <= 50; seq++ {
				if err := l.Append(ctx, storetest.Walkthrough(id, seq)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Append(ctx, storetest.Walkthrough("session-0", 52)); err == nil {
		t.Fatal("seq 52 after 50 was taken")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for len(data) > 0 {
		size := binary.LittleEndian.Uint32(data)
		body := data[8 : 8+size]
		if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(data[4:]) {
			t.Fatalf("record %d fails its CRC", n)
		}
		data = data[8+size:]
		n++
	}
	if n != 8*50 {
		t.Fatalf("%d records in the log, want %d", n, 8*50)
	}
}
