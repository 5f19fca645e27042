package protocol

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzUploadValidate builds a broadcast and an upload from the input
// (shapes from the first bytes, then items and words) and checks that
// Upload.Validate refuses or accepts it without panicking, and that an
// accepted upload gives its dense words (DenseWords), Row for each item,
// and a broadcast's Require, without panicking either.
func FuzzUploadValidate(f *testing.F) {
	f.Add(uint8(4), uint8(2), uint16(12), uint8(32), []byte{0, 0, 0, 2, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0})
	f.Add(uint8(4), uint8(2), uint16(13), uint8(32), []byte{0, 3, 1, 2, 3})
	f.Add(uint8(3), uint8(1), uint16(3), uint8(8), []byte{1, 2, 9, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, numItems, dim uint8, words uint16, bits uint8, data []byte) {
		b := &Broadcast{Round: 1, Phase: PhaseTrain, Dim: int(dim % 8), NumItems: int(numItems % 16), Words: int(words % 512), Bits: int(bits % 40)}
		if b.Validate() != nil {
			return
		}
		u := &Upload{Round: 1}
		if len(data) > 0 && data[0]&1 == 1 {
			u.Round = 2
		}
		data = data[min(1, len(data)):]
		if len(data) > 0 {
			n := int(data[0] % 32)
			data = data[1:]
			for k := 0; k < n && len(data) > 0; k++ {
				u.Items = append(u.Items, int32(int8(data[0])))
				data = data[1:]
			}
		}
		for len(data) >= 4 {
			u.Words = append(u.Words, binary.LittleEndian.Uint32(data))
			data = data[4:]
		}
		u.Words = u.Words[:len(u.Words):len(u.Words)] // no spare capacity to hide an overrun
		if len(u.Items)*b.Dim > 0 && len(u.Words)%2 == 0 {
			u.Values = make([]float32, len(u.Items)*b.Dim)
			u.Values[0] = float32(math.NaN())
		}
		if u.Validate(b) != nil {
			return
		}
		if u.Words != nil {
			if got := u.DenseWords(b); len(got) != b.Words {
				t.Fatalf("%d dense words for a round of %d", len(got), b.Words)
			}
		}
		if u.Values != nil {
			for k := range u.Items {
				u.Row(k, b.Dim)
			}
		}
	})
}
