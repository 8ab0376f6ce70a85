package journal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"maps"
	"testing"
)

// FuzzScan drives the record scanner over arbitrary bytes, in memory and so
// much faster than FuzzOpen: it must not panic, must stop on a record
// boundary, and must accept exactly that prefix again.
func FuzzScan(f *testing.F) {
	var seed []byte
	for _, its := range [][]Item{
		{{Key: []byte("post:1"), Delta: 1}},
		{{Key: []byte("post:1"), Delta: -1}, {Key: []byte("post:2"), Delta: 1 << 40}, {Key: nil, Delta: 0}},
	} {
		var err error
		if seed, err = appendRecord(seed, its); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-1])
	f.Add([]byte{})
	f.Add(make([]byte, 8))
	f.Fuzz(func(t *testing.T, body []byte) {
		scan := func(b []byte) (int64, int, string, map[string]int64, error) {
			deltas := make(map[string]int64)
			s := scanner{r: bytes.NewReader(b), size: int64(len(b))}
			n, damage, err := s.scan(deltas, map[string]float64{})
			return s.off, n, damage, deltas, err
		}
		// Frame body as one record with a good checksum, so the payload
		// decoder sees arbitrary input too, not only what passes a CRC.
		framed := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
		framed = binary.LittleEndian.AppendUint32(framed, crc32.Checksum(body, castagnoli))
		framed = append(framed, body...)
		decodeErr := decodePayload(body, func([]byte, int64, float64) error { return nil })
		if off, n, _, _, err := scan(framed); err == nil && (n == 1) != (decodeErr == nil) {
			t.Fatalf("framed payload: got %d records, stopping at %d; decodePayload says %v", n, off, decodeErr)
		}

		off, n, damage, deltas, err := scan(body)
		if err != nil {
			return // only a sum overflowing int64 gets here
		}
		if off < 0 || off > int64(len(body)) || (off < int64(len(body))) != (damage != "") {
			t.Fatalf("stopped at %d of %d with damage %q", off, len(body), damage)
		}
		off2, n2, damage2, deltas2, err := scan(body[:off])
		if err != nil || off2 != off || n2 != n || damage2 != "" || !maps.Equal(deltas, deltas2) {
			t.Fatalf("rescanning the good prefix: got %d, %d records, %q, %v, %v; want %d, %d records, no damage, %v",
				off2, n2, damage2, deltas2, err, off, n, deltas)
		}
	})
}

func TestAppendRecordRoundTrips(t *testing.T) {
	t.Parallel()
	its := []Item{{Key: []byte("a"), Delta: -1}, {Key: []byte{}, Delta: 1 << 62}, {Key: []byte("a"), Delta: 5}}
	rec, err := appendRecord([]byte("prefix"), its)
	if err != nil {
		t.Fatal(err)
	}
	rec = rec[len("prefix"):]
	deltas := make(map[string]int64)
	s := scanner{r: bytes.NewReader(rec), size: int64(len(rec))}
	n, damage, err := s.scan(deltas, map[string]float64{})
	if err != nil || n != 1 || damage != "" || s.off != int64(len(rec)) {
		t.Fatalf("scan: got %d records, damage %q, off %d, %v; want 1, none, %d, nil", n, damage, s.off, err, len(rec))
	}
	if want := map[string]int64{"a": 4, "": 1 << 62}; !maps.Equal(deltas, want) {
		t.Errorf("deltas: got %v; want %v", deltas, want)
	}
}

func TestAppendRecordTooLarge(t *testing.T) {
	t.Parallel()
	_, err := appendRecord(nil, []Item{{Key: make([]byte, maxPayload), Delta: 1}})
	if err == nil {
		t.Error("appendRecord of a record over the limit: got nil error; want one")
	}
}
