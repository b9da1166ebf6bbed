package postgres

import (
	"encoding/binary"
	"time"
)

// Element type OIDs of the arrays arrayWriter writes (pg_type).
const (
	oidBool        = 16
	oidInt8        = 20
	oidInt4        = 23
	oidText        = 25
	oidTimestamptz = 1184
	oidUUID        = 2950
)

// microsecondsToY2K is Postgres's timestamp epoch, 2000-01-01 UTC, in
// microseconds after the Unix epoch.
const microsecondsToY2K = 946_684_800 * 1_000_000

// arrayWriter writes one-dimensional arrays in Postgres's binary format
// (array_recv) into one buffer, one statement parameter each, the
// buffer kept from batch to batch. It is what pgx would send for the same
// Go slices, without building the slices: the group committer's arrays
// have a value per append or per event, and building them (a pointer per
// nullable value) and encoding them through pgx's generic plans was a
// fifth of agentd's CPU under load.
type arrayWriter struct {
	buf []byte
	// ends is where each finished parameter ends in buf.
	ends []int
	// start is where the array being written begins; count and null are
	// its elements so far and whether one of them is NULL.
	start, count int
	null         bool
}

// reset empties w, keeping its buffers.
func (w *arrayWriter) reset() {
	w.buf, w.ends = w.buf[:0], w.ends[:0]
}

// begin starts an array of elements of type oid. Its header's flags and
// length are filled in by end.
func (w *arrayWriter) begin(oid uint32) {
	w.start, w.count, w.null = len(w.buf), 0, false
	w.buf = binary.BigEndian.AppendUint32(w.buf, 1) // dimensions
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // flags: has nulls
	w.buf = binary.BigEndian.AppendUint32(w.buf, oid)
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0) // length
	w.buf = binary.BigEndian.AppendUint32(w.buf, 1) // lower bound
}

// end finishes the array begun last.
func (w *arrayWriter) end() {
	if w.null {
		binary.BigEndian.PutUint32(w.buf[w.start+4:], 1)
	}
	binary.BigEndian.PutUint32(w.buf[w.start+12:], uint32(w.count))
	w.ends = append(w.ends, len(w.buf))
}

// params are the finished arrays, each a slice of the buffer: valid until
// the next reset.
func (w *arrayWriter) params(dst [][]byte) [][]byte {
	from := 0
	for _, to := range w.ends {
		dst = append(dst, w.buf[from:to:to])
		from = to
	}
	return dst
}

func (w *arrayWriter) elem(n int) {
	w.count++
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(n))
}

func (w *arrayWriter) int4(v int32) {
	w.elem(4)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v))
}

func (w *arrayWriter) int8(v int64) {
	w.elem(8)
	w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v))
}

func (w *arrayWriter) bool(v bool) {
	w.elem(1)
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *arrayWriter) uuid(v [16]byte) {
	w.elem(16)
	w.buf = append(w.buf, v[:]...)
}

// text writes s, which must be valid UTF-8 without NUL (param.Text).
func (w *arrayWriter) text(s string) {
	w.elem(len(s))
	w.buf = append(w.buf, s...)
}

// optText writes s, or NULL when it is empty.
func (w *arrayWriter) optText(s string) {
	if s == "" {
		w.nullElem()
		return
	}
	w.text(s)
}

// optBytes is optText for text held as bytes (JSON), without making a
// string of it.
func (w *arrayWriter) optBytes(b []byte) {
	if len(b) == 0 {
		w.nullElem()
		return
	}
	w.elem(len(b))
	w.buf = append(w.buf, b...)
}

// time writes t as a timestamptz: microseconds since 2000-01-01 UTC,
// rounded down as pgx does.
func (w *arrayWriter) time(t time.Time) {
	w.int8(t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - microsecondsToY2K)
}

// optTime writes *t, or NULL for nil.
func (w *arrayWriter) optTime(t *time.Time) {
	if t == nil {
		w.nullElem()
		return
	}
	w.time(*t)
}

func (w *arrayWriter) nullElem() {
	w.count++
	w.null = true
	w.buf = binary.BigEndian.AppendUint32(w.buf, 0xFFFFFFFF) // length -1
}
