package postgres

import (
	"encoding/binary"

	"github.com/jackc/pgx/v5/pgtype"
)

// A batch's columns go to PostgreSQL as arrays (insertEventsSQL), 14 of
// them for ~25 rows a commit under load. pgx's own array codec boxes every
// element into an interface, and goes through reflect for [][]byte, which
// cost the lab ~3 µs of CPU a change, most of what encoding a batch cost
// (issue 46's profile). The columns below write PostgreSQL's binary array
// format themselves, in one pass and without an allocation; the bytes are
// those pgx sends for the same slice (TestColumnsEncodeAsPgx).
type (
	textColumn  []string // text[]
	byteaColumn [][]byte // bytea[]
	byteaText   []string // bytea[], from strings: no copy to []byte first
	int8Column  []int64  // bigint[]
)

// column is a batch's column, written as a one-dimensional array without
// NULLs in PostgreSQL's binary format.
type column interface {
	appendArray(buf []byte) []byte
}

// Element OIDs, as the array's header names them.
const (
	textOID  = pgtype.TextOID
	byteaOID = pgtype.ByteaOID
	int8OID  = pgtype.Int8OID
)

// arrayHeader appends the header of a one-dimensional array of n elements
// of type elem, grown for size bytes of elements (their lengths included).
func arrayHeader(buf []byte, elem uint32, n, size int) []byte {
	if need := len(buf) + 20 + size; need > cap(buf) {
		// Twice what this array needs: pgx builds all of a statement's
		// parameters in one buffer, which it shrinks after each statement,
		// so each batch grows it anew, column after column.
		grown := make([]byte, len(buf), 2*need)
		copy(grown, buf)
		buf = grown
	}
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // no NULLs
	buf = binary.BigEndian.AppendUint32(buf, elem)
	buf = binary.BigEndian.AppendUint32(buf, uint32(n))
	return binary.BigEndian.AppendUint32(buf, 1) // lower bound
}

func (c textColumn) appendArray(buf []byte) []byte  { return appendBytes(buf, textOID, c) }
func (c byteaColumn) appendArray(buf []byte) []byte { return appendBytes(buf, byteaOID, c) }
func (c byteaText) appendArray(buf []byte) []byte   { return appendBytes(buf, byteaOID, c) }

// appendBytes writes c as an array of elem, text or bytea: either's binary
// form is its bytes.
func appendBytes[E ~string | ~[]byte](buf []byte, elem uint32, c []E) []byte {
	size := 4 * len(c)
	for _, e := range c {
		size += len(e)
	}
	buf = arrayHeader(buf, elem, len(c), size)
	for _, e := range c {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(e)))
		buf = append(buf, e...)
	}
	return buf
}

func (c int8Column) appendArray(buf []byte) []byte {
	buf = arrayHeader(buf, int8OID, len(c), 12*len(c))
	for _, v := range c {
		buf = binary.BigEndian.AppendUint32(buf, 8)
		buf = binary.BigEndian.AppendUint64(buf, uint64(v))
	}
	return buf
}

// columnCodec is an array type's codec on the pool's connections: a
// column of its element type is encoded by the column itself, anything
// else by pgx's codec (Codec), as before.
type columnCodec struct {
	pgtype.Codec
	elem uint32
}

func (c columnCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if col, ok := value.(column); ok && format == pgtype.BinaryFormatCode && elemOID(col) == c.elem {
		return columnPlan{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// elemOID is the element type col writes.
func elemOID(col column) uint32 {
	switch col.(type) {
	case textColumn:
		return textOID
	case byteaColumn, byteaText:
		return byteaOID
	case int8Column:
		return int8OID
	}
	return 0
}

// columnPlan encodes a column.
type columnPlan struct{}

func (columnPlan) Encode(value any, buf []byte) ([]byte, error) {
	return value.(column).appendArray(buf), nil
}

// registerColumns has m encode the columns (called on each of the pool's
// connections, AfterConnect). An array type m does not know is left alone:
// a column then fails to encode, loudly, rather than going wrong.
func registerColumns(m *pgtype.Map) {
	for _, a := range []struct{ array, elem uint32 }{
		{pgtype.TextArrayOID, textOID},
		{pgtype.ByteaArrayOID, byteaOID},
		{pgtype.Int8ArrayOID, int8OID},
	} {
		t, ok := m.TypeForOID(a.array)
		if !ok {
			continue
		}
		if _, done := t.Codec.(columnCodec); done {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: columnCodec{Codec: t.Codec, elem: a.elem}})
	}
}
