package maskplan

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
)

// Plan is a method's integer path: its releases in round order,
// calibrated together (New). A Step with Rho 0 is a round that releases
// nothing (a setup round, a final broadcast).
type Plan struct {
	Steps []Step
	// Eta is the calibration's slack: each release's Skellam noise is
	// (1+Eta) times the least its Gaussian term needs.
	Eta float64
	// Eps is the ε at Delta of all releases with every share arriving,
	// for add/remove-one neighbours; EpsReplace for replace-one.
	Eps, EpsReplace float64
	Delta           float64
}

// New calibrates steps (Calibrate) to reach eps at delta.
func New(steps []Step, eps, delta float64) (*Plan, error) {
	p := &Plan{Steps: steps, Delta: delta}
	var err error
	if p.Eta, p.Eps, p.EpsReplace, err = Calibrate(steps, eps, delta); err != nil {
		return nil, err
	}
	return p, nil
}

// ParamClients is the broadcast parameter that carries N, the clients
// counted in a run's setup round.
const ParamClients = "clients"

// Shares returns the number of clients each client's noise share of b's
// round is drawn for: protocol.NoiseShares of the clients counted at
// setup (ParamClients), or of the roster the broadcast names.
func Shares(b *protocol.Broadcast) int {
	return protocol.NoiseShares(b, int(b.Param(ParamClients, 1)))
}

// Spent returns the ε at Delta of the releases of the first n steps with
// the noise that arrived: arrived[i] shares of step i's Skellam noise,
// each drawn for shares[i] clients (Step.Curve), composed by Rényi
// accounting; 0 before any release. A step with shares[i] = 0 folded no
// sum (a skipped round): it released nothing and costs nothing.
func (p *Plan) Spent(arrived, shares []int, n int) float64 {
	var cs []rdp.Curve
	for i := range n {
		if ms := &p.Steps[i]; ms.Rho > 0 && shares[i] > 0 {
			cs = append(cs, ms.Curve(arrived[i], shares[i]))
		}
	}
	if len(cs) == 0 {
		return 0
	}
	eps, _ := rdp.ToDP(rdp.Compose(cs...), p.Delta)
	return eps
}

// StepSpent returns the ε at Delta of step i's release alone with the
// noise that arrived; false for a step that releases nothing or whose
// sum carried no share.
func (p *Plan) StepSpent(i, arrived, shares int) (float64, bool) {
	ms := &p.Steps[i]
	if ms.Rho == 0 || arrived == 0 {
		return 0, false
	}
	eps, _ := rdp.ToDP(ms.Curve(arrived, shares), p.Delta)
	return eps, true
}

// Coverage returns, for step i's release, the fraction of its calibrated
// noise that arrived (arrived/shares, capped at 1) and its ε alone with
// that noise (StepSpent). The arrival word is a word of the masked sum:
// Check bounds it by the inputs, and a client sending 2 (or 0) moves the
// figure by one share.
func (p *Plan) Coverage(i, arrived, shares int) (coverage, eps float64, ok bool) {
	if eps, ok = p.StepSpent(i, arrived, shares); !ok {
		return 0, 0, false
	}
	return math.Min(1, float64(arrived)/float64(max(shares, 1))), eps, true
}

// Check checks the unmasked sum w of step i, in round, of inputs clients'
// masked vectors drawn for shares clients each (Step.Check); nothing for
// a step that releases nothing.
func (p *Plan) Check(i, round int, w []uint32, inputs, shares int) error {
	if ms := &p.Steps[i]; ms.Rho > 0 {
		return ms.Check(round, w, inputs, shares)
	}
	return nil
}

// CheckSetup checks the unmasked sum w of a setup round, in which every
// client adds 1 to a single word: one word, at most inputs.
func CheckSetup(round int, w []uint32, inputs int) error {
	if len(w) != 1 {
		return fmt.Errorf("%w: masked setup sum has %d words, want 1", protocol.ErrMessage, len(w))
	}
	if int64(w[0]) > int64(inputs) {
		return fmt.Errorf("%w: round %d (setup) word 0: count %d above the %d inputs", protocol.ErrOutOfBounds, round, w[0], inputs)
	}
	return nil
}
