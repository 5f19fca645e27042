package rng

import "testing"

func TestNewReproducibleAndDistinct(t *testing.T) {
	tests := []struct {
		name string
		a, b []uint64
		same bool
	}{
		{"same path", []uint64{1, 2}, []uint64{1, 2}, true},
		{"other stream", []uint64{1, 2}, []uint64{1, 3}, false},
		{"other seed", []uint64{1, 2}, []uint64{2, 2}, false},
		{"prefix differs from longer path", []uint64{1}, []uint64{1, 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ra := New(tc.a[0], tc.a[1:]...)
			rb := New(tc.b[0], tc.b[1:]...)
			same := true
			for range 4 {
				if ra.Uint64() != rb.Uint64() {
					same = false
				}
			}
			if same != tc.same {
				t.Errorf("streams equal = %v, want %v", same, tc.same)
			}
		})
	}
}

func TestCryptoVaries(t *testing.T) {
	r := Crypto()
	if r.Uint64() == r.Uint64() {
		t.Error("two crypto draws are equal")
	}
}
