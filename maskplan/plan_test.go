package maskplan

import (
	"errors"
	"testing"

	"github.com/privrec/privrec/protocol"
)

// TestPlanAccounting: with every share arriving a plan spends the ε it
// was calibrated to; with half of one release's shares it spends more;
// a step without a release and a sum without shares spend nothing.
func TestPlanAccounting(t *testing.T) {
	p, err := New([]Step{{}, NewStep(0.02, []int{4}, []float64{3}, []float64{1}), NewStep(0.03, []int{2, 3}, []float64{2, 5}, []float64{1, 2}), {}}, 1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	all := []int{0, 10, 10, 0}
	if got := p.Spent(all, all, 4); got != p.Eps {
		t.Errorf("every share arriving: ε %v, calibrated %v", got, p.Eps)
	}
	half := []int{0, 5, 10, 0}
	if got := p.Spent(half, all, 4); !(got > p.Eps) {
		t.Errorf("half of a release's shares: ε %v, not above %v", got, p.Eps)
	}
	if got := p.Spent(all, all, 1); got != 0 {
		t.Errorf("before any release: ε %v", got)
	}
	if _, ok := p.StepSpent(0, 10, 10); ok {
		t.Error("a step without a release spends")
	}
	if _, _, ok := p.Coverage(1, 0, 10); ok {
		t.Error("a sum without shares has a coverage")
	}
	cov, eps, ok := p.Coverage(1, 5, 10)
	if e, _ := p.StepSpent(1, 5, 10); !ok || cov != 0.5 || eps != e {
		t.Errorf("coverage %v ε %v ok %v; want 0.5, %v, true", cov, eps, ok, e)
	}
	if cov, _, _ := p.Coverage(1, 12, 10); cov != 1 {
		t.Errorf("more shares than drawn for: coverage %v, want 1", cov)
	}
}

func TestCheckSetup(t *testing.T) {
	tests := []struct {
		w    []uint32
		want error
	}{
		{[]uint32{7}, nil},
		{[]uint32{8}, protocol.ErrOutOfBounds},
		{[]uint32{1, 1}, protocol.ErrMessage},
	}
	for _, tc := range tests {
		if err := CheckSetup(0, tc.w, 7); !errors.Is(err, tc.want) && (err != nil || tc.want != nil) {
			t.Errorf("%v: %v, want %v", tc.w, err, tc.want)
		}
	}
}
