package protocol

import (
	"errors"
	"testing"
)

// TestScalarsAnnounced: a round that announces its scalars
// (ParamScalars) refuses an upload carrying more, accepts as many or
// fewer; a round that announces none leaves them unchecked.
func TestScalarsAnnounced(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   map[string]float64
		scalars  int
		announce int
		ok       bool
	}{
		{"as many", map[string]float64{ParamScalars: 4}, 4, 4, true},
		{"fewer", map[string]float64{ParamScalars: 4}, 1, 4, true},
		{"more", map[string]float64{ParamScalars: 4}, 5, 4, false},
		{"none announced", nil, 100, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Broadcast{Round: 2, NumItems: 3, Params: tc.params}
			if got := b.Scalars(); got != tc.announce {
				t.Errorf("Scalars() = %d, want %d", got, tc.announce)
			}
			err := (&Upload{Client: 1, Round: 2, Scalars: make([]float64, tc.scalars)}).Validate(b)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrMessage)) {
				t.Errorf("Validate: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
