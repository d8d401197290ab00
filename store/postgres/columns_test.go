package postgres

import (
	"bytes"
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/toolcall-lab/lab/model"
	"github.com/toolcall-lab/lab/store"
	"github.com/toolcall-lab/lab/store/storetest"
)

const weird = "\x00 é \U0001F600 \xff"

// TestColumnsEncodeAsPgx: a column's bytes are those pgx's own codec sends
// for the same slice, empty ones included; it costs no allocation where
// pgx's costs one or more an element; the plain slices still go to pgx's
// codec.
func TestColumnsEncodeAsPgx(t *testing.T) {
	strs := []string{"a", "", weird, "session-0001"}
	blobs := make([][]byte, len(strs))
	for i, s := range strs {
		blobs[i] = []byte(s)
	}
	ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 40}
	pgx, ours := pgtype.NewMap(), pgtype.NewMap()
	registerColumns(ours)
	registerColumns(ours) // again, as each new connection: nothing doubles
	cases := []struct {
		name      string
		oid       uint32
		pgx, ours any
	}{
		{"text", pgtype.TextArrayOID, strs, textColumn(strs)},
		{"bytea", pgtype.ByteaArrayOID, blobs, byteaColumn(blobs)},
		{"bytea from strings", pgtype.ByteaArrayOID, blobs, byteaText(strs)},
		{"bigint", pgtype.Int8ArrayOID, ints, int8Column(ints)},
		{"empty text", pgtype.TextArrayOID, []string{}, textColumn{}},
		{"empty bigint", pgtype.Int8ArrayOID, []int64{}, int8Column{}},
	}
	for _, c := range cases {
		want, err := pgx.Encode(c.oid, pgtype.BinaryFormatCode, c.pgx, nil)
		if err != nil {
			t.Fatal(c.name, err)
		}
		got, err := ours.Encode(c.oid, pgtype.BinaryFormatCode, c.ours, []byte("x"))
		if err != nil || !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("%s: % x (%v), want x then % x", c.name, got, err, want)
		}
		// The slice itself, not a column, still encodes as pgx has it.
		if plain, err := ours.Encode(c.oid, pgtype.BinaryFormatCode, c.pgx, nil); err != nil || !bytes.Equal(plain, want) {
			t.Errorf("%s, the plain slice: % x (%v), want % x", c.name, plain, err, want)
		}
		buf := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(100, func() { _, _ = ours.Encode(c.oid, pgtype.BinaryFormatCode, c.ours, buf) }); n != 0 {
			t.Errorf("%s: %v allocations, want none", c.name, n)
		}
	}
	// A nil one is NULL, as a nil slice.
	if got, err := ours.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, int8Column(nil), nil); got != nil || err != nil {
		t.Errorf("a nil column: % x (%v), want NULL", got, err)
	}
	// A column of the wrong element type is not sent as another's array.
	if _, err := ours.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, int8Column(ints), nil); err == nil {
		t.Error("a bigint column encoded as text[]")
	}
}

// TestPostgresBatchKeepsTextExactly: the batch's arrays (columns.go) give
// back every text byte for byte, as the lone append does
// (storetest's TestStoresKeepTextExactly): NUL, any Unicode, bytes that
// are not UTF-8, empty ones, a first record's session and a rename's name.
func TestPostgresBatchKeepsTextExactly(t *testing.T) {
	t.Parallel()
	s := openPG(t)
	ctx := context.Background()
	a := storetest.Sample("a")[:2]
	a[0].Notice, a[0].Run = "Accepted completion: "+weird, "run-\x001"
	a[0].Event.Message.Raw = weird
	a[1].Event.Message.Key = model.Key{RunID: "r" + weird, CallID: "c" + weird}
	a[1].Notice, a[1].Run = "", ""
	b := storetest.Sample("b")[6] // a rename, the session's first record
	b.Seq, b.Event.Name = 1, "n"+weird
	c := storetest.Sample("c")[9] // a program's source, with NUL
	c.Seq = 1
	d := storetest.Sample("d")[0]
	for _, errs := range [][]error{commitNow(s, a[0], b, c), commitNow(s, a[1], d)} {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, want := range map[string][]store.Record{"a": a, "b": {b}, "c": {c}, "d": {d}} {
		got, err := s.Events(ctx, id)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("session %s: %v\n%+v\nwant %+v", id, err, got, want)
		}
	}
	infos, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.ID == "b" && info.Name != b.Event.Name {
			t.Fatalf("session b named %q, want %q", info.Name, b.Event.Name)
		}
	}
}
