package postgres

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestArraysAreWhatPgxSends writes arrays of every element type the group
// committer uses, with NULLs, empty arrays and times before 2000 and far
// ahead, and requires the bytes pgx sends for the same Go slices.
func TestArraysAreWhatPgxSends(t *testing.T) {
	m := pgtype.NewMap()
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := string(rune('a'+rng.IntN(26))) + "é—" + string(make([]byte, rng.IntN(40)))
		return &s
	}
	when := func() *time.Time {
		if rng.IntN(3) == 0 {
			return nil
		}
		t := time.Unix(rng.Int64N(8e9)-2e9, rng.Int64N(1e9)).In(time.FixedZone("x", 3600*rng.IntN(12)))
		return &t
	}
	var w arrayWriter
	for round := range 200 {
		n := rng.IntN(5)
		if round == 0 {
			n = 0
		}
		// Empty, not nil: pgx sends a nil slice as NULL.
		var (
			i4    = []int32{}
			i8    = []int64{}
			texts = []*string{}
			bools = []bool{}
			ids   = [][16]byte{}
			times = []*time.Time{}
		)
		for range n {
			i4 = append(i4, rng.Int32()-rng.Int32())
			i8 = append(i8, rng.Int64()-rng.Int64())
			texts = append(texts, str())
			bools = append(bools, rng.IntN(2) == 0)
			var id [16]byte
			for k := range id {
				id[k] = byte(rng.IntN(256))
			}
			ids = append(ids, id)
			times = append(times, when())
		}
		w.reset()
		array := func(oid uint32, f func(i int)) {
			w.begin(oid)
			for i := range n {
				f(i)
			}
			w.end()
		}
		array(oidInt4, func(i int) { w.int4(i4[i]) })
		array(oidInt8, func(i int) { w.int8(i8[i]) })
		array(oidText, func(i int) {
			switch {
			case texts[i] == nil && i%2 == 0:
				w.optText("")
			case texts[i] == nil:
				w.optBytes(nil)
			case i%2 == 0:
				w.optText(*texts[i])
			default:
				w.optBytes([]byte(*texts[i]))
			}
		})
		array(oidBool, func(i int) { w.bool(bools[i]) })
		array(oidUUID, func(i int) { w.uuid(ids[i]) })
		array(oidTimestamptz, func(i int) { w.optTime(times[i]) })
		got := w.params(nil)
		for k, c := range []struct {
			oid uint32
			v   any
		}{
			{pgtype.Int4ArrayOID, i4}, {pgtype.Int8ArrayOID, i8}, {pgtype.TextArrayOID, texts},
			{pgtype.BoolArrayOID, bools}, {pgtype.UUIDArrayOID, ids}, {pgtype.TimestamptzArrayOID, times},
		} {
			want, err := m.Encode(c.oid, pgtype.BinaryFormatCode, c.v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[k], want) {
				t.Fatalf("round %d, array %d (oid %d) of %v:\n got %x\nwant %x", round, k, c.oid, c.v, got[k], want)
			}
		}
	}
}
