package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/privrec/privrec/eval"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// writePlots draws, per dataset and variant, each metric against the swept
// parameter (or per method without a sweep) with ±1 sd error bars, the
// error CDFs and the learning curves, as PNG and SVG.
func writePlots(o *Outcome, gs []*group, dir string) ([]string, error) {
	out := &plotFiles{dir: dir}
	variants, xs := axes(o)
	numeric := numericSweep(o.Spec, xs)
	for _, ds := range o.Spec.Datasets {
		for _, v := range variants {
			pn := &panel{o: o, gs: gs, ds: ds, v: v, xs: xs, numeric: numeric}
			if err := pn.write(out); err != nil {
				return out.paths, err
			}
		}
	}
	return out.paths, nil
}

// plotFiles saves plots under dir/plots and collects the paths written.
type plotFiles struct {
	dir   string
	paths []string
}

// save writes p as name.png and name.svg, each atomically. A nil p (a plot
// with nothing drawn) is not saved.
func (pf *plotFiles) save(p *plot.Plot, name string) error {
	if p == nil {
		return nil
	}
	for _, ext := range []string{"png", "svg"} {
		wt, err := render(p, ext)
		if err != nil {
			return err
		}
		path := filepath.Join(pf.dir, "plots", name+"."+ext)
		if err := writeAtomicFunc(path, func(f *os.File) error {
			_, err := wt.WriteTo(f)
			return err
		}); err != nil {
			return err
		}
		pf.paths = append(pf.paths, path)
	}
	return nil
}

// numericSweep reports whether the sweep values xs are all numbers, so
// plotted at their values rather than as evenly spaced names.
func numericSweep(s *Spec, xs []string) bool {
	numeric := s.Sweep != nil
	for _, x := range xs {
		if _, ok := xFloat(x); !ok {
			numeric = false
		}
	}
	return numeric
}

// panel is one dataset and variant of an outcome: the plots drawn for it
// share a file name base.
type panel struct {
	o       *Outcome
	gs      []*group
	ds, v   string   // dataset and variant
	xs      []string // sweep values in spec order; [""] without a sweep
	numeric bool     // the sweep values are numbers (numericSweep)
}

// write draws and saves the plots of the panel: each metric, then for each
// sweep value the error CDF and the learning curve when the spec asks for
// them.
func (pn *panel) write(out *plotFiles) error {
	base := fileName(pn.ds, pn.v)
	for _, metric := range reportMetrics(pn.o.Spec) {
		p, err := pn.metricPlot(metric)
		if err != nil {
			return err
		}
		if err := out.save(p, metric+"_"+base); err != nil {
			return err
		}
	}
	for _, k := range seriesKinds(pn.o.Spec) {
		for _, x := range pn.xs {
			p, err := pn.seriesPlot(k, x)
			if err != nil {
				return err
			}
			if err := out.save(p, k.file+"_"+base+xFile(x)); err != nil {
				return err
			}
		}
	}
	return nil
}

// metricPlot draws a metric with ±1 sd error bars: against the swept
// parameter when several values are swept, else one point per method. It
// returns nil if no method has a value.
func (pn *panel) metricPlot(metric string) (*plot.Plot, error) {
	s := pn.o.Spec
	p := plot.New()
	p.Title.Text = titleOf(pn.ds, pn.v, strings.ToUpper(metric))
	p.Y.Label.Text = strings.ToUpper(metric)
	if s.Sweep != nil {
		p.X.Label.Text = s.Sweep.Param
		if s.Sweep.Label != "" {
			p.X.Label.Text = s.Sweep.Label
		}
	}
	var drawn bool
	var err error
	if s.Sweep != nil && len(pn.xs) > 1 {
		drawn, err = pn.addSweepLines(p, metric)
	} else {
		drawn, err = pn.addMethodPoints(p, metric)
	}
	if err != nil || !drawn {
		return nil, err
	}
	return p, nil
}

// addSweepLines adds to p a line per method through its mean metric at
// each sweep value, with the sweep axis: numeric (logarithmic if the spec
// says so) or nominal. drawn is false if no method has a value.
func (pn *panel) addSweepLines(p *plot.Plot, metric string) (drawn bool, err error) {
	for k, m := range pn.o.Plan.Methods {
		pts, errs := pn.sweepPoints(m, metric)
		if len(pts) == 0 {
			continue
		}
		if err := addSeries(p, k, m.label(), pts, errs); err != nil {
			return drawn, err
		}
		drawn = true
	}
	if !pn.numeric {
		p.NominalX(pn.xs...)
	}
	if pn.o.Spec.Sweep.LogX && pn.numeric {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
	}
	return drawn, nil
}

// sweepPoints returns the mean and sd of a method's metric at each sweep
// value that has one; x is the value if the sweep is numeric, else its
// position.
func (pn *panel) sweepPoints(m *planMethod, metric string) (plotter.XYs, plotter.YErrors) {
	var pts plotter.XYs
	var errs plotter.YErrors
	for i, x := range pn.xs {
		sm, ok := meanOf(findGroup(pn.gs, pn.ds, pn.v, x, m), metric)
		if !ok {
			continue
		}
		xv := float64(i)
		if pn.numeric {
			xv, _ = xFloat(x)
		}
		pts = append(pts, plotter.XY{X: xv, Y: sm.Mean})
		errs = append(errs, struct{ Low, High float64 }{sm.Std, sm.Std})
	}
	return pts, errs
}

// addMethodPoints adds to p a point per method, at the method's position on
// a nominal axis of method labels, for the first (or only) sweep value.
// drawn is false if no method has a value.
func (pn *panel) addMethodPoints(p *plot.Plot, metric string) (drawn bool, err error) {
	var names []string
	for k, m := range pn.o.Plan.Methods {
		names = append(names, m.label())
		sm, ok := meanOf(findGroup(pn.gs, pn.ds, pn.v, pn.xs[0], m), metric)
		if !ok {
			continue
		}
		pts := plotter.XYs{{X: float64(k), Y: sm.Mean}}
		errs := plotter.YErrors{{Low: sm.Std, High: sm.Std}}
		if err := addSeries(p, k, "", pts, errs); err != nil {
			return drawn, err
		}
		drawn = true
	}
	p.NominalX(names...)
	return drawn, nil
}

// meanOf summarizes a metric over g's records; ok is false if g has no
// records or the metric no finite value.
func meanOf(g *group, metric string) (sm eval.Summary, ok bool) {
	if g == nil || len(g.recs) == 0 {
		return eval.Summary{}, false
	}
	sm = g.summary(metric)
	return sm, !math.IsNaN(sm.Mean)
}

// seriesKind is a per-record series plotted per sweep value, one line per
// method: the error CDF or the learning curve.
type seriesKind struct {
	file           string // file name prefix
	what           string // in the title
	xLabel, yLabel string
	get            func(*Record) []Num
	xs             []float64 // x values of the series; nil: 1, 2, ...
}

// seriesKinds returns the series the spec asks to plot: the error CDF
// (if it has CDF points), then the learning curve (if it asks for curves).
func seriesKinds(s *Spec) []seriesKind {
	var out []seriesKind
	if len(s.CDF) > 0 {
		out = append(out, seriesKind{file: "cdf", what: "error CDF", xLabel: "absolute error", yLabel: "fraction of test ratings",
			get: func(r *Record) []Num { return r.CDF }, xs: s.CDF})
	}
	if s.Curves {
		out = append(out, seriesKind{file: "curve", what: "training RMSE per epoch", xLabel: "epoch", yLabel: "training RMSE",
			get: func(r *Record) []Num { return r.Curve }})
	}
	return out
}

// seriesPlot draws series k of each method, averaged over its records, at
// sweep value x. It returns nil if no method has the series.
func (pn *panel) seriesPlot(k seriesKind, x string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = titleOf(pn.ds, pn.v, k.what+xSuffix(pn.o.Spec, x))
	p.X.Label.Text = k.xLabel
	p.Y.Label.Text = k.yLabel
	drawn := false
	for i, m := range pn.o.Plan.Methods {
		g := findGroup(pn.gs, pn.ds, pn.v, x, m)
		if pts := meanSeries(g, k.get, k.xs); len(pts) > 0 {
			if err := addSeries(p, i, m.label(), pts, nil); err != nil {
				return nil, err
			}
			drawn = true
		}
	}
	if !drawn {
		return nil, nil
	}
	return p, nil
}

// render draws p at 6 × 4 inches with its legend, if any, in a column to
// the right of the plot, where it cannot hide a curve.
func render(p *plot.Plot, ext string) (vg.CanvasWriterTo, error) {
	const w, h, gap = 6 * vg.Inch, 4 * vg.Inch, vg.Inch / 8
	leg := p.Legend
	p.Legend = plot.NewLegend()
	defer func() { p.Legend = leg }()
	r := leg.Rectangle(draw.Canvas{})
	lw := r.Max.X - r.Min.X
	if lw > 0 {
		lw += 2 * gap
	}
	c, err := draw.NewFormattedCanvas(w+lw, h, ext)
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	b := dc.Rectangle
	dc.FillPolygon(p.BackgroundColor, []vg.Point{b.Min, {X: b.Max.X, Y: b.Min.Y}, b.Max, {X: b.Min.X, Y: b.Max.Y}})
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	if lw > 0 {
		leg.Left, leg.Top = true, true
		// Below the title, level with the top of the plotting area.
		top := p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding + gap
		leg.Draw(draw.Crop(dc, w+gap, 0, 0, -top))
	}
	return c, nil
}

// addSeries adds a line with points (and error bars) in the k-th style.
func addSeries(p *plot.Plot, k int, name string, pts plotter.XYs, errs plotter.YErrors) error {
	lp, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	lp.Color = plotutil.Color(k)
	lp.Dashes = plotutil.Dashes(k)
	sc.Color = plotutil.Color(k)
	sc.Shape = plotutil.Shape(k)
	if len(pts) == 1 {
		p.Add(sc)
	} else {
		p.Add(lp, sc)
	}
	if name != "" {
		p.Legend.Add(name, lp, sc)
	}
	if errs != nil {
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{pts, errs})
		if err != nil {
			return err
		}
		eb.Color = plotutil.Color(k)
		p.Add(eb)
	}
	return nil
}

// meanSeries averages a per-record series over g's records; xs are the x
// values (nil: 1, 2, ...).
func meanSeries(g *group, get func(*Record) []Num, xs []float64) plotter.XYs {
	if g == nil {
		return nil
	}
	var sum []float64
	var cnt []int
	for _, r := range g.recs {
		for i, v := range get(r) {
			if i >= len(sum) {
				sum = append(sum, 0)
				cnt = append(cnt, 0)
			}
			if !math.IsNaN(float64(v)) {
				sum[i] += float64(v)
				cnt[i]++
			}
		}
	}
	var pts plotter.XYs
	for i := range sum {
		if cnt[i] == 0 {
			continue
		}
		x := float64(i + 1)
		if xs != nil {
			if i >= len(xs) {
				break
			}
			x = xs[i]
		}
		pts = append(pts, plotter.XY{X: x, Y: sum[i] / float64(cnt[i])})
	}
	return pts
}

func titleOf(ds, v, what string) string {
	if v != "" {
		return fmt.Sprintf("%s, %s: %s", ds, v, what)
	}
	return ds + ": " + what
}

func xSuffix(s *Spec, x string) string {
	if x == "" {
		return ""
	}
	return fmt.Sprintf(" (%s = %s)", s.Sweep.Param, x)
}

func xFile(x string) string {
	if x == "" {
		return ""
	}
	return "_x" + sanitize(x)
}

func fileName(ds, v string) string {
	if filepath.IsAbs(ds) {
		ds = filepath.Base(ds)
	}
	n := sanitize(ds)
	if v != "" {
		n += "_" + sanitize(v)
	}
	return n
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, s)
}
