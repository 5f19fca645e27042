package dpals

import (
	"math"
	"testing"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/ratings"
)

// TestDifferenceAttackOnReleasedCounts mounts the difference attack on
// what the server receives: an adversary who knows every other user's
// ratings (so the noise-free counts without the target) reads the noisy
// weighted counts of a bias round and guesses that the target rated item j
// when the count exceeds the known one by more than half the target's
// per-item weight. Against dp-als at ε = 1 (the round's share of the
// budget) its balanced accuracy over many runs is near 0.5 and below the
// (ε, δ) bound; against the control, the same sums without noise (secure
// aggregation alone), it finds the target's items exactly.
func TestDifferenceAttackOnReleasedCounts(t *testing.T) {
	d, err := ratings.Synthetic(ratings.SyntheticConfig{Users: 300, Items: 60, Rank: 3, PerUser: 15, Noise: 0.3}, 11)
	if err != nil {
		t.Fatal(err)
	}
	rated := map[int]bool{}
	for _, j := range []int{3, 8, 13, 21, 34, 40, 47, 55} {
		rated[j] = true
	}
	without, with := withCanary(d, func(j int) float32 {
		if rated[j] {
			return 5
		}
		return 0
	})
	for _, c := range []struct {
		name        string
		sigmaScale  float64 // 1: dp-als; below 1: the control's smaller noise
		maxAccuracy float64
		minAccuracy float64
	}{
		{"dp-als", 1, 0.6, 0},
		{"control: sums without noise", 0, 1, 0.99},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := BiasesConfig()
			cfg.Eps, cfg.BiasRounds = 1, 1
			rho, _ := rdp.ZCDPRhoFor(cfg.Eps, cfg.Delta)
			// The adversary's knowledge: the noise-free counts without the
			// target, from the same public state.
			var known []float64
			tr := pinned(without, cfg, 5)
			tr.active = nil // bias rounds run before any item is marked active
			tr.rec = func(n string, s []float64) {
				if n == "counts" {
					known = s
				}
			}
			// The target's weight on each item is public: the popularity
			// weights p_j normalized over the items it rated.
			var n2 float64
			for j := range rated {
				n2 += tr.weight[j] * tr.weight[j]
			}
			ws := make([]float64, tr.ni)
			for j := range ws {
				ws[j] = tr.weight[j] / math.Sqrt(n2)
			}
			tr.biasRound(0, (1-cfg.FracMean)*rho)
			var tp, fn, tn, fp float64
			for seed := uint64(1); seed <= 400; seed++ {
				tr := pinned(with, cfg, 5)
				tr.active = nil
				tr.seed = seed
				var clean []float64
				tr.rec = func(n string, s []float64) {
					if n == "counts" {
						clean = s
					}
				}
				tr.biasRound(0, (1-cfg.FracMean)*rho)
				for j := range tr.ni {
					view := tr.count[j] // the released noisy count
					if c.sigmaScale != 1 {
						// The control: the same release with its noise
						// scaled by sigmaScale.
						view = clean[j] + c.sigmaScale*(tr.count[j]-clean[j])
					}
					guess := view-known[j] > ws[j]/2
					switch {
					case rated[j] && guess:
						tp++
					case rated[j]:
						fn++
					case guess:
						fp++
					default:
						tn++
					}
				}
			}
			acc := (tp/(tp+fn) + tn/(tn+fp)) / 2
			bound := (math.Exp(cfg.Eps) + cfg.Delta) / (1 + math.Exp(cfg.Eps))
			t.Logf("balanced accuracy %.3f (TPR %.3f, FPR %.3f); the (ε, δ) bound on one test %.3f", acc, tp/(tp+fn), fp/(fp+tn), bound)
			if acc > c.maxAccuracy || acc < c.minAccuracy {
				t.Errorf("balanced accuracy %.3f, want in [%g, %g]", acc, c.minAccuracy, c.maxAccuracy)
			}
			if c.sigmaScale == 1 && acc > bound {
				t.Errorf("balanced accuracy %.3f above the ε = %g bound %.3f", acc, cfg.Eps, bound)
			}
		})
	}
}
