package dp

import (
	"math"
	"testing"
)

func TestStretch(t *testing.T) {
	values := []float32{1, 3, 5}
	w := []float64{0.5, 0.1, 1}
	dst := make([]float32, 3)
	Stretch(values, w, dst)
	for k := range values {
		if want := float32(w[k]) * values[k]; math.Abs(float64(dst[k]-want)) > 1e-6 {
			t.Errorf("stretched %d = %v, want %v", k, dst[k], want)
		}
	}
	if got := HDPMFNoiseScale(4, 4, 1); got != 16 {
		t.Errorf("HDPMFNoiseScale(4, 4, 1) = %v, want 16", got)
	}
}
