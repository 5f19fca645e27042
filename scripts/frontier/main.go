// Command frontier draws the privacy–utility frontier of issue 23 from the
// JSON lines that scripts/frontier.sh collects (one `privrec evaluate
// --json` object per line, with three fields added: "label", "k", the
// median number of training ratings of a user, and "rank", the run's
// Recall@20 and NDCG@20 on the ranking protocol of evaluate --rank).
// Every private method is a point at the total ε of the unit it protects
// (user-level methods) or, for rating-level methods, at k·ε, what group
// privacy gives a user with the median number of ratings; non-private
// references are horizontal lines. It writes frontier.png and
// frontier.svg (test RMSE), ranking.png and ranking.svg (Recall@20), and
// table.md into the output folder. Ranking-only methods (no RMSE) appear
// only in the ranking plot and with "—" in the RMSE column; runs from
// before the ranking columns (no "rank") with "—" in those.
//
//	go run ./scripts/frontier -in docs/results/frontier/runs.jsonl -out docs/results/frontier
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// run is the part of one line of runs.jsonl that the frontier reads.
type run struct {
	Label  string             `json:"label"`
	K      float64            `json:"k"`
	Method string             `json:"method"`
	Seed   uint64             `json:"seed"`
	RMSE   *float64           `json:"rmse"`
	Rank   map[string]float64 `json:"rank"`
	// EpsPaper is a method's ε as its paper computes it, when that is
	// not an upper bound (its privacy.eps_total is then "Inf").
	EpsPaper *float64 `json:"eps_total_paper"`
	Privacy  *struct {
		Unit     string          `json:"unit"`
		Trusted  string          `json:"trusted"`
		EpsTotal json.RawMessage `json:"eps_total"`
		Delta    float64         `json:"delta"`
	} `json:"privacy"`
}

// The metrics a point averages: test RMSE and the ranking columns.
const (
	mRMSE   = "rmse"
	mRecall = "recall@20"
	mNDCG   = "ndcg@20"
)

// point is a (label, ε) group of runs averaged over seeds.
type point struct {
	label, unit, trusted string
	eps, userEps, delta  float64
	runs                 int
	// vals holds each metric's values over the runs that report it.
	vals map[string][]float64
	// paperOnly marks a method whose reported ε is its paper's figure and
	// not an upper bound (notBound): no proven figure, no point drawn.
	paperOnly bool
}

// notBound lists the methods whose reported ε is not an upper bound for
// their unit against privrec's server, with the reason (issue 32).
var notBound = map[string]string{
	"sdmf": "the existence bound assumes the server learns nothing from the gradients' values, and `privrec audit --attack grid` beats it; real errors are sent untruncated while Thm 3's ε_g assumes [−α, α]",
}

// add records the metrics of one run r.
func (p *point) add(r run) {
	p.runs++
	if r.RMSE != nil {
		p.vals[mRMSE] = append(p.vals[mRMSE], *r.RMSE)
	}
	for _, m := range []string{mRecall, mNDCG} {
		if v, ok := r.Rank[m]; ok {
			p.vals[m] = append(p.vals[m], v)
		}
	}
}

// has reports whether some run of p reports metric m.
func (p *point) has(m string) bool { return len(p.vals[m]) > 0 }

// mean is metric m's mean over the runs that report it (NaN if none).
func (p *point) mean(m string) float64 {
	xs := p.vals[m]
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// sd is metric m's sample standard deviation (0 for fewer than two runs).
func (p *point) sd(m string) float64 {
	xs := p.vals[m]
	if len(xs) < 2 {
		return 0
	}
	mu := p.mean(m)
	var s float64
	for _, x := range xs {
		s += (x - mu) * (x - mu)
	}
	return math.Sqrt(s / float64(len(xs)-1))
}

// cell formats metric m of p for the table: "—" when no run reports it.
func (p *point) cell(m string) string {
	if !p.has(m) {
		return "—"
	}
	c := fmt.Sprintf("%.4f", p.mean(m))
	if len(p.vals[m]) > 1 {
		c += fmt.Sprintf(" ± %.4f", p.sd(m))
	}
	return c
}

func main() {
	in := flag.String("in", "docs/results/frontier/runs.jsonl", "the runs, one JSON object a line")
	out := flag.String("out", "docs/results/frontier", "output folder")
	flag.Parse()
	pts, err := read(*in)
	if err != nil {
		log.Fatal(err)
	}
	if err := table(pts, filepath.Join(*out, "table.md")); err != nil {
		log.Fatal(err)
	}
	if err := draw2(pts, *out, mRMSE); err != nil {
		log.Fatal(err)
	}
	if err := draw2(pts, *out, mRecall); err != nil {
		log.Fatal(err)
	}
}

// read groups the runs of file by label and ε.
func read(file string) ([]*point, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	by := map[string]*point{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		var r run
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		if r.RMSE == nil && len(r.Rank) == 0 {
			return nil, fmt.Errorf("%s:%d: run %q has neither rmse nor rank", file, n, r.Label)
		}
		p := &point{label: r.Label, unit: "none", trusted: "everyone", vals: map[string][]float64{}}
		if r.Privacy != nil {
			p.unit, p.trusted, p.delta = r.Privacy.Unit, r.Privacy.Trusted, r.Privacy.Delta
			if err := json.Unmarshal(r.Privacy.EpsTotal, &p.eps); err != nil {
				p.eps = math.Inf(1) // "Inf"
			}
		}
		_, p.paperOnly = notBound[r.Method]
		if p.paperOnly && r.EpsPaper != nil {
			p.eps = *r.EpsPaper
		}
		switch {
		case p.unit == "none", p.paperOnly:
			p.userEps = math.Inf(1)
		case userLevel(p.unit):
			p.userEps = p.eps
		default:
			p.userEps = r.K * p.eps
		}
		key := fmt.Sprintf("%s|%g", p.label, p.eps)
		if q, ok := by[key]; ok {
			q.add(r)
			continue
		}
		p.add(r)
		by[key] = p
		order = append(order, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]*point, len(order))
	for i, k := range order {
		out[i] = by[k]
	}
	return out, nil
}

// table writes the points as a markdown table.
func table(pts []*point, file string) error {
	var b strings.Builder
	b.WriteString("| method | protects | trusted | ε (its unit) | δ | user-level ε (median user) | test RMSE | Recall@20 | NDCG@20 | runs |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range pts {
		eps, ue := "—", "—"
		if p.unit != "none" {
			eps = fmt.Sprintf("%.4g", p.eps)
			ue = fmt.Sprintf("%.4g", p.userEps)
			if !userLevel(p.unit) {
				ue += " (group)"
			}
			if p.paperOnly {
				eps += " (the paper's figure, not a bound)"
				ue = "none proven"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0e | %s | %s | %s | %s | %d |\n", p.label, p.unit, p.trusted, eps, p.delta, ue,
			p.cell(mRMSE), p.cell(mRecall), p.cell(mNDCG), p.runs)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// draw2 draws metric m (mRMSE or mRecall) against user-level ε on a log
// axis, into frontier.png/.svg (RMSE) or ranking.png/.svg (Recall@20).
// Points without the metric are left out.
func draw2(pts []*point, dir, m string) error {
	p := plot.New()
	name := "RMSE"
	file := "frontier"
	if m == mRecall {
		name, file = "Recall@20", "ranking"
	}
	p.Title.Text = "ML-1M random 80/20: test " + name + " against user-level ε"
	p.X.Label.Text = "total ε for one user's ratings (rating-level methods: k·ε, k = median user's ratings)"
	p.Y.Label.Text = "test " + name
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = false
	series := map[string]plotter.XYs{}
	var labels []string
	xmin, xmax := math.Inf(1), 0.0
	for _, q := range pts {
		if math.IsInf(q.userEps, 1) || !(q.userEps > 0) || !q.has(m) {
			continue
		}
		if _, ok := series[q.label]; !ok {
			labels = append(labels, q.label)
		}
		series[q.label] = append(series[q.label], plotter.XY{X: q.userEps, Y: q.mean(m)})
		xmin, xmax = min(xmin, q.userEps), max(xmax, q.userEps)
	}
	for k, l := range labels {
		xy := series[l]
		sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = plotutil.Color(k)
		sc.GlyphStyle.Shape = plotutil.Shape(k)
		sc.GlyphStyle.Radius = vg.Points(3.5)
		p.Add(sc)
		p.Legend.Add(l, sc)
		if len(xy) > 1 {
			ln, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			ln.Color = plotutil.Color(k)
			p.Add(ln)
		}
	}
	// Non-private references as horizontal lines.
	k := len(labels)
	for _, q := range pts {
		if q.unit != "none" || !q.has(m) {
			continue
		}
		ln, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: q.mean(m)}, {X: xmax, Y: q.mean(m)}})
		if err != nil {
			return err
		}
		ln.Color = color.Gray{Y: uint8(60 + 40*(k%4))}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(q.label+" (not private)", ln)
		k++
	}
	// The issues' figures, for comparison: issue 23's for a biases-only
	// joint-DP model (RMSE), issue 33's targets for a private top-N method
	// (Recall@20); ML-1M random 80/20, user-level ε at δ = 1e-6.
	ref, refLabel := plotter.XYs{{X: 1, Y: 0.974}, {X: 2, Y: 0.952}, {X: 5, Y: 0.927}, {X: 10, Y: 0.915}}, "biases only, as issue 23 reports it"
	if m == mRecall {
		ref, refLabel = plotter.XYs{{X: 1, Y: 0.17}, {X: 10, Y: 0.26}}, "issue 33's targets for a private top-N method"
	}
	rs, err := plotter.NewScatter(ref)
	if err != nil {
		return err
	}
	rs.GlyphStyle.Shape = draw.CrossGlyph{}
	rs.GlyphStyle.Radius = vg.Points(4)
	p.Add(rs)
	p.Legend.Add(refLabel, rs)
	var ticks []plot.Tick
	if m == mRecall {
		for y := 0.0; y <= 0.5001; y += 0.05 {
			ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("%.2f", y)})
		}
		p.Y.Min, p.Y.Max = 0, 0.5
	} else {
		for y := 0.85; y <= 1.1001; y += 0.025 {
			ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("%.3f", y)})
		}
		p.Y.Min, p.Y.Max = 0.84, 1.1
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1)
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, filepath.Join(dir, file+"."+ext)); err != nil {
			return err
		}
	}
	return nil
}

// userLevel reports whether unit is a whole user's (a user added or
// removed, or all of one user's ratings or rating values, issue 32's
// proven units): its ε is placed as it is, without group privacy.
func userLevel(unit string) bool { return unit == "user" || strings.HasPrefix(unit, "user's") }
