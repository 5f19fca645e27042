package main

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/privrec/privrec/method"
)

// defaultBudget is what a private method spends at its defaults: ε of one
// round and of the whole run for one protected unit (the method's claim
// says which: a rating value, a rating's existence, a user), and δ. Where
// the spend depends on the data (the most exposed rating's weight, a
// user's number of ratings), Round and Total hold the smallest and the
// largest value measured.
type defaultBudget struct {
	Round, Total [2]float64
	Delta        float64
	Datasets     int    // how many datasets it was measured on
	Note         string // why it varies, or how it was measured when not by the defaults experiment
	// Paper, when not nil, holds the per-rating figures as the paper
	// computes them (round, total ranges), which the defaults experiment's
	// cells recorded as the headline before issue 32: Round and Total are
	// then the proven figures computed from those cells' calibration (the
	// user clip's C times the recorded per-round ε, composed by the
	// smaller of basic composition and zCDP at δ 1e-6; LDP-OP's recorded
	// eps_total_user), not measured by a run.
	Paper *[2][2]float64
}

// defaultBudgets are the spends of every private method at its defaults,
// as measured by the defaults experiment (docs/results/defaults, the
// privacy of each cell: ml-latest-small, ml-100k, ml-1m, douban-monti,
// yelp-hin; TestDefaultBudgetsMatchResults checks them against its
// cells.jsonl), and sd-bprmf, which that experiment leaves out as a
// ranking method, measured by privrec train at its defaults.
var inf = math.Inf(1)

var defaultBudgets = map[string]defaultBudget{
	"dp-als":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 5, Note: "one user-level total over the whole run (zCDP, converted at δ)"},
	"dp-biases":      {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 5, Note: "one user-level total over the whole run (zCDP, converted at δ)"},
	"dp-ease":        {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 1, Note: "one user-level total over both releases (zCDP on the ideal path, Rényi accounting of the Skellam releases on the masked path; converted at δ); each release alone on ML-1M at the defaults: counts 0.293, Gram 0.945; measured on ML-1M, docs/results/private-topn.md, not yet in the defaults report"},
	"dp-globalavg":   {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dp-itemavg":     {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dp-pop":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 1, Note: "one user-level Gaussian release (zCDP, converted at δ); measured by privrec evaluate on ml-1m (docs/results/ranking.md)"},
	"dp-pmf":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dpmf":           {Round: [2]float64{0.0802936, 0.0829799}, Total: [2]float64{4.08036, 4.23319}, Delta: 1e-06, Datasets: 5, Note: "user-level: C = 8 times the smallest budget of the rating groups (set by the data's group shares) a round; 100 rounds composed in zCDP at δ 1e-6", Paper: &[2][2]float64{{0.0100367, 0.0103725}, {1.00367, 1.03725}}},
	"hdpmf":          {Round: [2]float64{8, 8}, Total: [2]float64{800, 800}, Datasets: 5, Note: "user-level: C = 8 times ε = 1 a round, basic composition over 100 rounds", Paper: &[2][2]float64{{1, 1}, {100, 100}}},
	"isgld":          {Round: [2]float64{4, 4}, Total: [2]float64{4, 4}, Datasets: 5},
	"ldp-op":         {Round: [2]float64{2, 2}, Total: [2]float64{1742.8, 1959.97}, Datasets: 5, Note: "user-level: 2ε·Σ_j ‖c_j‖₂ in total, grows with the positions released in the rows of the data's items", Paper: &[2][2]float64{{1, 1}, {1.41421, 2.23607}}},
	"ldp-op-basic":   {Round: [2]float64{inf, inf}, Total: [2]float64{inf, inf}, Datasets: 4, Note: "no proven ε: the noise is the same every round, so differences of rounds are noise-free", Paper: &[2][2]float64{{3.16228, 3.16228}, {3.16228, 3.16228}}},
	"pdp-pmf":        {Round: [2]float64{0.785795, 0.787593}, Total: [2]float64{0.785795, 0.787593}, Datasets: 5, Note: "personalized: the largest 2·min(ε_k, t), t set by the data's group shares"},
	"pdpmf":          {Round: [2]float64{2.83932, 2.89804}, Total: [2]float64{283.932, 289.804}, Datasets: 5, Note: "user-level: C = 8 times the sampling threshold t (set by the data's group shares) a round; basic composition over 100 rounds", Paper: &[2][2]float64{{0.354915, 0.362255}, {35.4915, 36.2255}}},
	"sd-bprmf":       {Round: [2]float64{1, 1}, Total: [2]float64{2, 2}, Datasets: 1, Note: "measured by privrec train at defaults on ml-latest-small (--min-user-ratings 1000); min(ε_P, T·ε_I) + T·ε_g"},
	"sd-fm":          {Round: [2]float64{inf, inf}, Total: [2]float64{inf, inf}, Datasets: 5, Note: "no proven ε (the claim's note says why); the paper's figure is min(ε_P, T·ε_I) + T·ε_g over 100 rounds", Paper: &[2][2]float64{{2, 2}, {102, 102}}},
	"sdmf":           {Round: [2]float64{inf, inf}, Total: [2]float64{inf, inf}, Datasets: 5, Note: "no proven ε (the claim's note says why); the paper's figure is min(ε_P, T·ε_I) + T·ε_g over 100 rounds", Paper: &[2][2]float64{{2, 2}, {102, 102}}},
	"sdmf-alpha-inf": {Round: [2]float64{inf, inf}, Total: [2]float64{inf, inf}, Datasets: 5, Note: "no proven ε (the claim's note says why); the paper's figure is min(ε_P, T·ε_I) + T·ε_g, ε_g = 0", Paper: &[2][2]float64{{1, 1}, {2, 2}}},
}

// budgetInfo is a method's default spend in privrec methods --json.
type budgetInfo struct {
	// Unit is what one ε protects (the claim's unit).
	Unit string `json:"unit"`
	// EpsRound and EpsTotal are ε of one round and of the run at the
	// defaults: the largest measured where it depends on the data, whose
	// range EpsRoundMin and EpsTotalMin complete.
	EpsRound    epsFigure `json:"eps_round"`
	EpsTotal    epsFigure `json:"eps_total"`
	EpsRoundMin float64   `json:"eps_round_min,omitempty"`
	EpsTotalMin float64   `json:"eps_total_min,omitempty"`
	Delta       float64   `json:"delta"`
	// DependsOnData is true when the spend differs between datasets.
	DependsOnData bool `json:"depends_on_data,omitempty"`
	// EpsRoundPaper and EpsTotalPaper are the per-rating figures as the
	// paper computes them, where they differ from the proven ones (the
	// largest measured; not upper bounds).
	EpsRoundPaper float64 `json:"eps_round_paper,omitempty"`
	EpsTotalPaper float64 `json:"eps_total_paper,omitempty"`
	// Source says where the figures come from.
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
}

// budgetOf returns the default spend of s, nil for a non-private method.
func budgetOf(s method.Spec) *budgetInfo {
	b, ok := defaultBudgets[s.Name]
	if !ok || s.Claim.Unit == "none" {
		return nil
	}
	out := &budgetInfo{Unit: s.Claim.Unit, EpsRound: epsFigure(b.Round[1]), EpsTotal: epsFigure(b.Total[1]), Delta: b.Delta, Note: b.Note,
		Source: fmt.Sprintf("measured at the defaults on %d dataset(s) (docs/results/defaults)", b.Datasets)}
	if b.Paper != nil {
		out.EpsRoundPaper, out.EpsTotalPaper = b.Paper[0][1], b.Paper[1][1]
		out.Source = fmt.Sprintf("the proven figure, computed from the calibration the defaults recorded on %d dataset(s) (docs/results/defaults); "+
			"eps_round_paper and eps_total_paper are the paper's per-rating figures measured there, not bounds", b.Datasets)
	}
	if s.Name == "sd-bprmf" {
		out.Source = "measured at the defaults by privrec train"
	}
	if b.Round[0] != b.Round[1] || b.Total[0] != b.Total[1] {
		out.DependsOnData = true
		out.EpsRoundMin, out.EpsTotalMin = b.Round[0], b.Total[0]
	}
	if math.IsInf(b.Total[1], 1) {
		out.DependsOnData, out.EpsRoundMin, out.EpsTotalMin = false, 0, 0
	}
	return out
}

// epsFigure is an ε in JSON: a number, or the string "Inf" where no ε is
// proven.
type epsFigure float64

func (f epsFigure) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 1) {
		return []byte(`"Inf"`), nil
	}
	return json.Marshal(float64(f))
}
