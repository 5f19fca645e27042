package dpals

import (
	"fmt"
	"math"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/protocol"
)

// Block is a run of consecutive coordinates of one round's upload and the
// sensitivity the run's privacy figure charges for it, for one user added
// or removed: what privrec/audit's sensitivity canary checks measured
// changes against.
type Block struct {
	// Name names the release (the ledger's name on the Gaussian path).
	Name string
	// Size is the number of coordinates of the upload the block covers.
	Size int
	// L1 and L2 are the charged sensitivities; L1 is +Inf where the figure
	// rests on L2 alone (the Gaussian path's zCDP ledger).
	L1, L2 float64
}

// Charged returns the blocks of the upload of round (numbered as the
// protocol numbers them) of cfg's run over ni items, in upload order: on
// the Gaussian path one block per ledger release with the L2 sensitivity
// the ledger charges (in the upload's float units); on the integer path
// (secagg=masked) one block of the release's coordinates, the arrival
// word excluded, with the integer sensitivities the Skellam calibration
// charges (Δ2 = G + √d, Δ1 = min(√d·Δ2, Δ2²)). Rounds without a release
// (the integer path's setup, the final round) return nil.
func Charged(cfg Config, ni, round int) ([]Block, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rho, err := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
	if err != nil {
		return nil, fmt.Errorf("dpals: %w", err)
	}
	steps, factors := schedule(cfg, rho)
	if round < 0 || round >= len(steps) {
		return nil, fmt.Errorf("dpals: round %d of a run of %d rounds", round, len(steps))
	}
	if cfg.Aggregation == protocol.AggMasked {
		p, err := newMaskPlan(cfg, ni)
		if err != nil {
			return nil, err
		}
		ms := p.Steps[round]
		if ms.Rho == 0 {
			return nil, nil
		}
		return []Block{{Name: "integer sum", Size: ms.D, L1: ms.L1, L2: ms.L2}}, nil
	}
	k := 0
	if factors {
		k = cfg.Dim
	}
	var l rdp.Ledger
	sig := noiseSigmas(cfg, steps[round], &l, nil)
	if sig == nil {
		return nil, nil
	}
	sizes, _ := blocks(cfg, steps[round], sig, ni, k)
	rel := l.Releases()
	if len(rel) != len(sizes) {
		return nil, fmt.Errorf("dpals: round %d has %d releases and %d blocks", round, len(rel), len(sizes))
	}
	out := make([]Block, len(rel))
	for i, r := range rel {
		out[i] = Block{Name: r.Name, Size: sizes[i], L1: math.Inf(1), L2: r.L2}
	}
	return out, nil
}

// Noiseless switches the integer path's Skellam shares off, so that the
// uploads carry only their data: for privrec/audit's sensitivity canary,
// which replays the same broadcasts to the clients of two neighbouring
// datasets and compares the noise-free sums. (The Gaussian path's noise
// is the server's and never in an upload.) The uploads then protect
// nothing.
func (cs *Clients) Noiseless() { cs.obs.noiseless = true }
