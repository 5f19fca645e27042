package main

import (
	"fmt"

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
}

// defaultBudgets are the spends of every private method at its defaults,
// as measured by the defaults experiment (docs/results/defaults, the
// privacy of each cell: ml-latest-small, ml-100k, ml-1m, douban-monti,
// yelp-hin; TestDefaultBudgetsMatchResults checks them against its
// cells.jsonl), and sd-bprmf, which that experiment leaves out as a
// ranking method, measured by privrec train at its defaults.
var defaultBudgets = map[string]defaultBudget{
	"dp-als":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 5, Note: "one user-level total over the whole run (zCDP, converted at δ)"},
	"dp-biases":      {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 5, Note: "one user-level total over the whole run (zCDP, converted at δ)"},
	"dp-globalavg":   {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dp-itemavg":     {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dp-pop":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Delta: 1e-06, Datasets: 1, Note: "one user-level Gaussian release (zCDP, converted at δ); measured by privrec evaluate on ml-1m (docs/results/ranking.md)"},
	"dp-pmf":         {Round: [2]float64{1, 1}, Total: [2]float64{1, 1}, Datasets: 5},
	"dpmf":           {Round: [2]float64{0.0100367, 0.0103725}, Total: [2]float64{1.00367, 1.03725}, Datasets: 5, Note: "the smallest budget of the rating groups, set by the data's group shares"},
	"hdpmf":          {Round: [2]float64{1, 1}, Total: [2]float64{100, 100}, Datasets: 5, Note: "basic composition over 100 rounds"},
	"isgld":          {Round: [2]float64{4, 4}, Total: [2]float64{4, 4}, Datasets: 5},
	"ldp-op":         {Round: [2]float64{1, 1}, Total: [2]float64{1.41421, 2.23607}, Datasets: 5, Note: "ε·max_j ‖c_j‖₂ in total: grows with the data's most exposed position"},
	"ldp-op-basic":   {Round: [2]float64{3.16228, 3.16228}, Total: [2]float64{3.16228, 3.16228}, Datasets: 4},
	"pdp-pmf":        {Round: [2]float64{0.785795, 0.787593}, Total: [2]float64{0.785795, 0.787593}, Datasets: 5, Note: "personalized: the largest 2·min(ε_k, t), t set by the data's group shares"},
	"pdpmf":          {Round: [2]float64{0.354915, 0.362255}, Total: [2]float64{35.4915, 36.2255}, Datasets: 5, Note: "the sampling threshold t is set by the data's group shares; basic composition over 100 rounds"},
	"sd-bprmf":       {Round: [2]float64{1, 1}, Total: [2]float64{2, 2}, Datasets: 1, Note: "measured by privrec train at defaults on ml-latest-small (--min-user-ratings 1000); min(ε_P, T·ε_I) + T·ε_g"},
	"sd-fm":          {Round: [2]float64{2, 2}, Total: [2]float64{102, 102}, Datasets: 5, Note: "min(ε_P, T·ε_I) + T·ε_g over 100 rounds"},
	"sdmf":           {Round: [2]float64{2, 2}, Total: [2]float64{102, 102}, Datasets: 5, Note: "min(ε_P, T·ε_I) + T·ε_g over 100 rounds"},
	"sdmf-alpha-inf": {Round: [2]float64{1, 1}, Total: [2]float64{2, 2}, Datasets: 5, Note: "min(ε_P, T·ε_I) + T·ε_g, ε_g = 0"},
}

// budgetInfo is a method's default spend in privrec methods --json.
type budgetInfo struct {
	// Unit is what one ε protects (the claim's unit).
	Unit string `json:"unit"`
	// EpsRound and EpsTotal are ε of one round and of the run at the
	// defaults: the largest measured where it depends on the data, whose
	// range EpsRoundMin and EpsTotalMin complete.
	EpsRound    float64 `json:"eps_round"`
	EpsTotal    float64 `json:"eps_total"`
	EpsRoundMin float64 `json:"eps_round_min,omitempty"`
	EpsTotalMin float64 `json:"eps_total_min,omitempty"`
	Delta       float64 `json:"delta"`
	// DependsOnData is true when the spend differs between datasets.
	DependsOnData bool `json:"depends_on_data,omitempty"`
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
	out := &budgetInfo{Unit: s.Claim.Unit, EpsRound: b.Round[1], EpsTotal: b.Total[1], Delta: b.Delta, Note: b.Note,
		Source: fmt.Sprintf("measured at the defaults on %d dataset(s) (docs/results/defaults)", b.Datasets)}
	if s.Name == "sd-bprmf" {
		out.Source = "measured at the defaults by privrec train"
	}
	if b.Round[0] != b.Round[1] || b.Total[0] != b.Total[1] {
		out.DependsOnData = true
		out.EpsRoundMin, out.EpsTotalMin = b.Round[0], b.Total[0]
	}
	return out
}
