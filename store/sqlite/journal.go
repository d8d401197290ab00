package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/toolcall-lab/lab/store"
)

// journal is one segment of the SQLite store's log of appends not yet in
// the database: two files beside it, "<path>-appends" and
// "<path>-appends2" ("-journal" would be SQLite's own rollback journal,
// which it would try to roll back), appends going to one while the other
// is moved into the database (Store.handOff). An append is in the
// journal when write(2) has returned, which is when it survives kill -9
// (the data is in the page cache; a power cut needs Options.FullSync, an
// fsync per write). The store moves a segment's rows into the chunks
// table in one transaction (Store.move, Store.inTx).
//
// The file is a header, journalMagic and the epoch (8 bytes, little
// endian), then records: a length and a CRC-32 of the body (4 bytes each,
// little endian), then the body (encodeRecord). The database keeps the
// epoch of the journal it has not taken in yet (table journal); a move
// increments it in the transaction that takes the rows, so a journal left
// behind by a crash between that commit and the emptying is known to be
// in the database already. A torn last record (the process killed in the
// middle of a write, whose append was not acknowledged) fails its length
// or CRC and is cut.
//
// Ownership: the store's leader writes it (one at a time, see Store);
// nothing else touches it after open.
type journal struct {
	f     *os.File
	size  int64 // bytes that hold whole records, header included
	epoch int64
	sync  bool   // fsync after every write (Options.FullSync)
	buf   []byte // the leader's scratch space
}

const (
	journalSuffix     = "-appends"
	journalSuffix2    = "-appends2" // the second segment (openJournals)
	journalMagic      = "labjrnl1"
	journalHeaderSize = len(journalMagic) + 8
	// maxJournalRecord bounds a record's body: a reply of 1 MiB and its
	// fields fit many times. A longer length is damage, not a record.
	maxJournalRecord = 16 << 20
)

// openJournals opens (creating them) the journal's two segment files
// beside the database at path, for a database at epoch, and returns the
// live one (appends go to it), the other, and the rows they hold that the
// database lacks, in the order they were appended. Appends go to one
// segment while the other is moved into the database (Store.handOff), so
// the live one is of the epoch after the other's: a segment of the
// database's epoch or the next holds rows the database lacks, one of an
// earlier epoch none (a crash between a move and the segment's emptying).
func openJournals(path string, epoch int64, sync bool) (live, other *journal, rows []*store.Row, err error) {
	a, aRows, err := openJournal(path+journalSuffix, epoch, sync)
	if err != nil {
		return nil, nil, nil, err
	}
	b, bRows, err := openJournal(path+journalSuffix2, epoch, sync)
	if err != nil {
		a.close()
		return nil, nil, nil, err
	}
	switch {
	case a.epoch == b.epoch && len(aRows) > 0 && len(bRows) > 0:
		a.close()
		b.close()
		return nil, nil, nil, fmt.Errorf("the journal's two files %s and %s are both of epoch %d: one was copied over the other; move one away", path+journalSuffix, path+journalSuffix2, a.epoch)
	case b.epoch > a.epoch || b.epoch == a.epoch && len(bRows) > 0:
		return b, a, append(aRows, bRows...), nil
	}
	return a, b, append(bRows, aRows...), nil
}

// openJournal opens (creating it) one segment of the journal at path for
// a database at epoch, and returns the rows it holds that the database
// lacks, in the order they were appended: none unless its epoch is the
// database's or the next (see openJournals). A file of an earlier epoch,
// a damaged header or a torn tail are cut back; a segment of a later
// epoch than that (the database restored from an older copy, say) is
// refused rather than guessed at.
func openJournal(path string, epoch int64, sync bool) (*journal, []*store.Row, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the journal: %w", err)
	}
	// Two processes appending to one journal would each cut the other's
	// records: the second is refused.
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("locking the journal %s (is another lab using the same data file?): %w", path, err)
	}
	j := &journal{f: f, epoch: epoch, sync: sync}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("reading the journal %s: %w", path, err)
	}
	var rows []*store.Row
	if len(data) >= journalHeaderSize && string(data[:len(journalMagic)]) == journalMagic {
		switch fileEpoch := int64(binary.LittleEndian.Uint64(data[len(journalMagic):])); {
		case fileEpoch > epoch+1:
			f.Close()
			return nil, nil, fmt.Errorf("the journal %s is of epoch %d, newer than its database's %d: the database was replaced or deleted without it (they belong together); to start without the changes it holds, move it away", path, fileEpoch, epoch)
		case fileEpoch >= epoch:
			j.epoch = fileEpoch
			rows, j.size = decodeRecords(data[journalHeaderSize:])
			j.size += int64(journalHeaderSize)
			if j.size == int64(len(data)) {
				return j, rows, nil
			}
			// A torn tail: cut it, so that the next record follows the last whole one.
			if err := f.Truncate(j.size); err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("cutting the journal's torn tail: %w", err)
			}
			return j, rows, nil
		}
	}
	if err := j.reset(epoch); err != nil {
		f.Close()
		return nil, nil, err
	}
	return j, nil, nil
}

// decodeRecords returns the whole records at the start of data and the
// bytes they take; it stops at the first that is torn or damaged.
func decodeRecords(data []byte) ([]*store.Row, int64) {
	var rows []*store.Row
	var n int64
	for len(data) >= 8 {
		size := binary.LittleEndian.Uint32(data)
		if size > maxJournalRecord || int(size) > len(data)-8 {
			break
		}
		body := data[8 : 8+size]
		if crc32.ChecksumIEEE(body) != binary.LittleEndian.Uint32(data[4:]) {
			break
		}
		w, err := decodeRecord(body)
		if err != nil {
			break
		}
		rows = append(rows, w)
		data = data[8+size:]
		n += int64(8 + size)
	}
	return rows, n
}

// append writes rows as one write; on failure it cuts the file back, so
// that rows reported as not stored are not found there later either (the
// store also empties it before the next append, in case the cut failed).
func (j *journal) append(rows []*store.Row) error {
	b := j.buf[:0]
	for _, w := range rows {
		b = appendRecord(b, w)
	}
	j.buf = b
	if _, err := j.f.WriteAt(b, j.size); err != nil {
		return errors.Join(fmt.Errorf("writing the journal: %w", err), j.f.Truncate(j.size))
	}
	if j.sync {
		if err := j.f.Sync(); err != nil {
			return errors.Join(fmt.Errorf("syncing the journal: %w", err), j.f.Truncate(j.size))
		}
	}
	j.size += int64(len(b))
	if cap(j.buf) > 1<<20 {
		j.buf = nil // a burst of big replies: do not keep its buffer
	}
	return nil
}

// reset empties the journal and starts it at epoch, once the database has
// taken every row it held (and holds epoch). epoch is the journal's from
// then on even if reset fails: it is the database's.
func (j *journal) reset(epoch int64) error {
	j.epoch = epoch
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("emptying the journal: %w", err)
	}
	var h [journalHeaderSize]byte
	copy(h[:], journalMagic)
	binary.LittleEndian.PutUint64(h[len(journalMagic):], uint64(epoch))
	if _, err := j.f.WriteAt(h[:], 0); err != nil {
		return fmt.Errorf("starting the journal: %w", err)
	}
	if j.sync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("syncing the journal: %w", err)
		}
	}
	j.size = int64(journalHeaderSize)
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// appendRecord frames one row: its body's length and CRC-32, then the body.
func appendRecord(b []byte, w *store.Row) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // filled in below
	b = encodeRecord(b, w)
	body := b[start+8:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.ChecksumIEEE(body))
	return b
}

// encodeRecord writes a row's columns: the numbers as varints, then each
// text as its length and bytes, in a fixed order (decodeRecord's).
func encodeRecord(b []byte, w *store.Row) []byte {
	b = binary.AppendVarint(b, w.Seq)
	b = binary.AppendVarint(b, w.TimeMs)
	b = binary.AppendVarint(b, w.Message)
	for _, s := range [...]string{w.Session, w.Actor, w.Kind, w.MsgKind, w.MsgFrom, w.KeyRun, w.KeyCall, w.Run, w.Notice, w.Prediction} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Raw)))
	return append(b, w.Raw...)
}

var errBadRecord = errors.New("a damaged journal record")

func decodeRecord(body []byte) (*store.Row, error) {
	w := &store.Row{}
	for _, n := range [...]*int64{&w.Seq, &w.TimeMs, &w.Message} {
		v, k := binary.Varint(body)
		if k <= 0 {
			return nil, errBadRecord
		}
		*n, body = v, body[k:]
	}
	text := func() ([]byte, bool) {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return nil, false
		}
		t := body[k : k+int(n)]
		body = body[k+int(n):]
		return t, true
	}
	for _, s := range [...]*string{&w.Session, &w.Actor, &w.Kind, &w.MsgKind, &w.MsgFrom, &w.KeyRun, &w.KeyCall, &w.Run, &w.Notice, &w.Prediction} {
		t, ok := text()
		if !ok {
			return nil, errBadRecord
		}
		*s = string(t)
	}
	raw, ok := text()
	if !ok || len(body) != 0 {
		return nil, errBadRecord
	}
	w.Raw = append([]byte{}, raw...) // a NOT NULL column: never nil
	return w, nil
}
