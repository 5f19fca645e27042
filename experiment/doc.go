// Package experiment runs the papers' tables and figures from declarative
// YAML specs, one command per experiment.
//
// A spec (shipped ones are in specs/, embedded; see Names, Get, Source)
// names the datasets and their preprocessing, the split and the number of
// seeds, the methods (registry names from package method, with params and
// optional grids for cross-validation), a privacy specification passed as
// method parameters, optional variants (a second axis such as K = 10 and
// K = 5), one swept parameter, the metrics, the paper's numbers and quick
// overrides:
//
//	name: hdpmf-table3
//	datasets: [ml-100k, ml-1m]
//	preprocess: {min_user_ratings: 20}
//	split: leave:10
//	seeds: 5
//	params: {epochs: 100, schedule: step}   # to every method that has them
//	privacy: {eps: 1, f-uc: 0.54}           # likewise
//	variants: [{name: K=10, params: {dim: 10}}, {name: K=5, params: {dim: 5}}]
//	sweep: {param: eps-uc, values: [0.1, 0.2]}  # or train-fraction, vendors
//	methods:
//	  - {name: hdpmf, label: HDPMF, grid: {reg: [0.01, 0.001]}}
//	cv: {folds: 5, metric: mse}
//	metrics: [mse, mae]                     # rmse, mse, mae, auc, cdf
//	reference:
//	  - {dataset: ml-100k, variant: K=10, method: HDPMF, metric: mse, value: 1.469}
//	quick: {datasets: [ml-latest-small], seeds: 2, params: {epochs: 10}, no_cv: true}
//
// Decoding is strict: an unknown key is an error naming it and its line.
// Parameters in params, privacy, variants and the sweep go only to the
// methods that have them; a method's own params must all exist. A method
// that is not registered yet is listed as missing and skipped. The runner
// always adds the non-private mf and the dp-itemavg baseline (at the
// privacy spec's eps, or eps-max, or baseline_eps) when a spec lacks them.
//
// Run expands a spec into cells (dataset × variant × sweep value × method
// × seed × fold, plus grid point × inner fold for cross-validation on the
// first seed's training part), runs them on a pool of workers and appends
// each finished cell to OUT/cells.jsonl at once (fsync'd), keyed by a hash
// of the cell's resolved configuration. A rerun reuses stored cells, so an
// interrupted run resumes and a changed spec recomputes only the changed
// cells. At the end Run writes, each atomically, cells.csv, summary.csv,
// cv.csv, plots/*.png and *.svg, and report.md with our numbers beside
// the paper's, paired t-tests against the first private method, the
// privacy claim and the ε spent per method, and generated reading facts.
// The cross-validation over grids reproduces the papers' protocols and is
// not private: no reported ε counts it (method.Tune selects privately).
package experiment
