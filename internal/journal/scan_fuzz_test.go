package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/counterd/counterd/internal/change"
)

// scanBytes scans b as the records of a segment of the given version.
func scanBytes(version uint32, b []byte) (*scanner, []change.Change, error) {
	s := &scanner{r: bytes.NewReader(b), version: version, size: int64(len(b))}
	var acc accumulator
	err := s.scan(&acc)
	return s, acc.changes, err
}

// FuzzScan drives the record scanner over arbitrary bytes of either format
// version, in memory and so much faster than FuzzOpen: it must not panic,
// must keep only whole good records, and must accept exactly those again.
func FuzzScan(f *testing.F) {
	recs := [][]change.Change{
		{{Key: "post:1", Kind: change.Total, Delta: 1}},
		{{Key: "post:1", Kind: change.Total, Delta: -1}, {Key: "post:2", Kind: change.Total, Delta: 1 << 40, Var: 3}, {Kind: change.Total}},
	}
	var seed, seed1 []byte
	for _, its := range recs {
		var err error
		if seed, err = appendRecord(seed, its); err != nil {
			f.Fatal(err)
		}
		seed1 = appendV1Record(seed1, its)
	}
	for _, v1 := range []bool{false, true} {
		s := seed
		if v1 {
			s = seed1
		}
		f.Add(v1, s)
		f.Add(v1, s[:len(s)-1])
		bad := bytes.Clone(s)
		bad[len(bad)/3] ^= 0x10
		f.Add(v1, bad)
		f.Add(v1, []byte{})
		f.Add(v1, make([]byte, 8))
	}
	f.Fuzz(func(t *testing.T, v1 bool, body []byte) {
		version := uint32(2)
		if v1 {
			version = 1
		}
		// Frame body as one record with a good checksum, so the payload
		// decoder sees arbitrary input too, not only what passes a CRC.
		framed := binary.LittleEndian.AppendUint32(nil, uint32(len(body)))
		framed = binary.LittleEndian.AppendUint32(framed, crc32.Checksum(body, castagnoli))
		framed = append(framed, body...)
		decodeErr := decodePayload(version, body, func(item) error { return nil })
		s, _, err := scanBytes(version, framed)
		switch {
		case decodeErr != nil && !errors.Is(decodeErr, errBadPayload):
			if err == nil {
				t.Fatalf("framed payload: scan accepted what decodePayload refuses: %v", decodeErr)
			}
		case err == nil && len(body) > 0 && (s.records == 1) != (decodeErr == nil):
			t.Fatalf("framed payload: got %d records, %d skipped; decodePayload says %v", s.records, s.skipped, decodeErr)
		}

		s, changes, err := scanBytes(version, body)
		if err != nil {
			return // a sum overflowing int64, or an unknown kind
		}
		if s.off < 0 || s.off > int64(len(body)) || (s.off < int64(len(body))) != (s.tailReason != "") {
			t.Fatalf("stopped at %d of %d with tail damage %q", s.off, len(body), s.tailReason)
		}
		var kept []byte
		last := int64(0)
		for _, sp := range s.good {
			if sp.start < last || sp.end <= sp.start || sp.end > s.off {
				t.Fatalf("good spans %v out of order or past %d", s.good, s.off)
			}
			kept = append(kept, body[sp.start:sp.end]...)
			last = sp.end
		}
		again, changes2, err := scanBytes(version, kept)
		if err != nil || again.damaged() || again.records != s.records || !slices.Equal(changes, changes2) {
			t.Fatalf("rescanning the good records: got %d records, damaged %v, %v, %v; want %d records, no damage, %v",
				again.records, again.damaged(), changes2, err, s.records, changes)
		}
	})
}

func TestAppendRecordRoundTrips(t *testing.T) {
	t.Parallel()
	its := []change.Change{
		{Key: "a", Kind: change.Total, Delta: -1},
		{Key: "", Kind: change.Total, Delta: 1 << 62, Var: 2.5},
		{Key: "a", Kind: change.Total, Delta: 5},
	}
	rec, err := appendRecord([]byte("prefix"), its)
	if err != nil {
		t.Fatal(err)
	}
	rec = rec[len("prefix"):]
	s, changes, err := scanBytes(segmentVersion, rec)
	if err != nil || s.records != 1 || s.damaged() || s.off != int64(len(rec)) {
		t.Fatalf("scan: got %d records, damaged %v, off %d, %v; want 1, no, %d, nil", s.records, s.damaged(), s.off, err, len(rec))
	}
	want := []change.Change{{Key: "a", Kind: change.Total, Delta: 4}, {Key: "", Kind: change.Total, Delta: 1 << 62, Var: 2.5}}
	if !slices.Equal(changes, want) {
		t.Errorf("changes: got %v; want %v", changes, want)
	}
}

func TestAppendRecordTooLarge(t *testing.T) {
	t.Parallel()
	_, err := appendRecord(nil, []change.Change{{Key: string(make([]byte, maxPayload)), Kind: change.Total, Delta: 1}})
	if err == nil {
		t.Error("appendRecord of a record over the limit: got nil error; want one")
	}
}
