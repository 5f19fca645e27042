// Command frontier draws the privacy–utility frontier of issue 23 from the
// JSON lines that scripts/frontier.sh collects (one `privrec evaluate
// --json` object per line, with two fields added: "label" and "k", the
// median number of training ratings of a user). Every private method is a
// point at the total ε of the unit it protects (user-level methods) or,
// for rating-level methods, at k·ε, what group privacy gives a user with
// the median number of ratings; non-private references are horizontal
// lines. It writes frontier.png, frontier.svg and table.md into the
// output folder.
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
	Label   string  `json:"label"`
	K       float64 `json:"k"`
	Method  string  `json:"method"`
	Seed    uint64  `json:"seed"`
	RMSE    float64 `json:"rmse"`
	Privacy *struct {
		Unit     string          `json:"unit"`
		Trusted  string          `json:"trusted"`
		EpsTotal json.RawMessage `json:"eps_total"`
		Delta    float64         `json:"delta"`
	} `json:"privacy"`
}

// point is a (label, ε) group of runs averaged over seeds.
type point struct {
	label, unit, trusted string
	eps, userEps, delta  float64
	rmse                 []float64
	// paperOnly marks a method whose reported ε is its paper's figure and
	// not an upper bound (notBound): no proven figure, no point drawn.
	paperOnly bool
}

// notBound lists the methods whose reported ε is not an upper bound for
// their unit against privrec's server, with the reason (issue 32).
var notBound = map[string]string{
	"sdmf": "the existence bound assumes the server learns nothing from the gradients' values, and `privrec audit --attack grid` beats it; real errors are sent untruncated while Thm 3's ε_g assumes [−α, α]",
}

func (p *point) mean() float64 {
	var s float64
	for _, x := range p.rmse {
		s += x
	}
	return s / float64(len(p.rmse))
}

func (p *point) sd() float64 {
	if len(p.rmse) < 2 {
		return 0
	}
	m := p.mean()
	var s float64
	for _, x := range p.rmse {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(p.rmse)-1))
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
	if err := draw2(pts, *out); err != nil {
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
		p := &point{label: r.Label, unit: "none", trusted: "everyone"}
		if r.Privacy != nil {
			p.unit, p.trusted, p.delta = r.Privacy.Unit, r.Privacy.Trusted, r.Privacy.Delta
			if err := json.Unmarshal(r.Privacy.EpsTotal, &p.eps); err != nil {
				p.eps = math.Inf(1) // "Inf"
			}
		}
		_, p.paperOnly = notBound[r.Method]
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
			q.rmse = append(q.rmse, r.RMSE)
			continue
		}
		p.rmse = []float64{r.RMSE}
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
	b.WriteString("| method | protects | trusted | ε (its unit) | δ | user-level ε (median user) | test RMSE | runs |\n|---|---|---|---|---|---|---|---|\n")
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
		sd := ""
		if len(p.rmse) > 1 {
			sd = fmt.Sprintf(" ± %.4f", p.sd())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.0e | %s | %.4f%s | %d |\n", p.label, p.unit, p.trusted, eps, p.delta, ue, p.mean(), sd, len(p.rmse))
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// draw2 draws the frontier: RMSE against user-level ε on a log axis.
func draw2(pts []*point, dir string) error {
	p := plot.New()
	p.Title.Text = "ML-1M random 80/20: test RMSE against user-level ε"
	p.X.Label.Text = "total ε for one user's ratings (rating-level methods: k·ε, k = median user's ratings)"
	p.Y.Label.Text = "test RMSE"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = false
	series := map[string]plotter.XYs{}
	var labels []string
	xmin, xmax := math.Inf(1), 0.0
	for _, q := range pts {
		if math.IsInf(q.userEps, 1) || !(q.userEps > 0) {
			continue
		}
		if _, ok := series[q.label]; !ok {
			labels = append(labels, q.label)
		}
		series[q.label] = append(series[q.label], plotter.XY{X: q.userEps, Y: q.mean()})
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
		if q.unit != "none" {
			continue
		}
		ln, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: q.mean()}, {X: xmax, Y: q.mean()}})
		if err != nil {
			return err
		}
		ln.Color = color.Gray{Y: uint8(60 + 40*(k%4))}
		ln.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(q.label+" (not private)", ln)
		k++
	}
	// The figures for a biases-only joint-DP model (issue 23, ML-1M
	// random 80/20, user-level ε at δ = 1e-6), for comparison.
	ref := plotter.XYs{{X: 1, Y: 0.974}, {X: 2, Y: 0.952}, {X: 5, Y: 0.927}, {X: 10, Y: 0.915}}
	rs, err := plotter.NewScatter(ref)
	if err != nil {
		return err
	}
	rs.GlyphStyle.Shape = draw.CrossGlyph{}
	rs.GlyphStyle.Radius = vg.Points(4)
	p.Add(rs)
	p.Legend.Add("biases only, as issue 23 reports it", rs)
	var ticks []plot.Tick
	for y := 0.85; y <= 1.1001; y += 0.025 {
		ticks = append(ticks, plot.Tick{Value: y, Label: fmt.Sprintf("%.3f", y)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = 0.84, 1.1
	p.Add(plotter.NewGrid())
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Padding = vg.Points(1)
	for _, ext := range []string{"png", "svg"} {
		if err := p.Save(9*vg.Inch, 6*vg.Inch, filepath.Join(dir, "frontier."+ext)); err != nil {
			return err
		}
	}
	return nil
}

// userLevel reports whether unit is a whole user's (a user added or
// removed, or all of one user's ratings or rating values, issue 32's
// proven units): its ε is placed as it is, without group privacy.
func userLevel(unit string) bool { return unit == "user" || strings.HasPrefix(unit, "user's") }
