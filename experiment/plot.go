package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

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
	s := o.Spec
	var files []string
	save := func(p *plot.Plot, name string) error {
		for _, ext := range []string{"png", "svg"} {
			wt, err := render(p, ext)
			if err != nil {
				return err
			}
			path := filepath.Join(dir, "plots", name+"."+ext)
			if err := writeAtomicFunc(path, func(f *os.File) error {
				_, err := wt.WriteTo(f)
				return err
			}); err != nil {
				return err
			}
			files = append(files, path)
		}
		return nil
	}
	variants, xs := axes(o)
	numeric := s.Sweep != nil
	for _, x := range xs {
		if _, ok := xFloat(x); !ok {
			numeric = false
		}
	}
	for _, ds := range s.Datasets {
		for _, v := range variants {
			base := fileName(ds, v)
			for _, metric := range reportMetrics(s) {
				p := plot.New()
				p.Title.Text = titleOf(ds, v, strings.ToUpper(metric))
				p.Y.Label.Text = strings.ToUpper(metric)
				if s.Sweep != nil {
					p.X.Label.Text = s.Sweep.Param
					if s.Sweep.Label != "" {
						p.X.Label.Text = s.Sweep.Label
					}
				}
				drawn := false
				if s.Sweep != nil && len(xs) > 1 {
					for k, m := range o.Plan.Methods {
						var pts plotter.XYs
						var errs plotter.YErrors
						for i, x := range xs {
							g := findGroup(gs, ds, v, x, m)
							if g == nil || len(g.recs) == 0 {
								continue
							}
							sm := g.summary(metric)
							if math.IsNaN(sm.Mean) {
								continue
							}
							xv := float64(i)
							if numeric {
								xv, _ = xFloat(x)
							}
							pts = append(pts, plotter.XY{X: xv, Y: sm.Mean})
							errs = append(errs, struct{ Low, High float64 }{sm.Std, sm.Std})
						}
						if len(pts) == 0 {
							continue
						}
						if err := addSeries(p, k, m.label(), pts, errs); err != nil {
							return files, err
						}
						drawn = true
					}
					if !numeric {
						p.NominalX(xs...)
					}
					if s.Sweep.LogX && numeric {
						p.X.Scale = plot.LogScale{}
						p.X.Tick.Marker = plot.LogTicks{}
					}
				} else {
					var names []string
					for k, m := range o.Plan.Methods {
						g := findGroup(gs, ds, v, xs[0], m)
						names = append(names, m.label())
						if g == nil || len(g.recs) == 0 {
							continue
						}
						sm := g.summary(metric)
						if math.IsNaN(sm.Mean) {
							continue
						}
						pts := plotter.XYs{{X: float64(k), Y: sm.Mean}}
						errs := plotter.YErrors{{Low: sm.Std, High: sm.Std}}
						if err := addSeries(p, k, "", pts, errs); err != nil {
							return files, err
						}
						drawn = true
					}
					p.NominalX(names...)
				}
				if drawn {
					if err := save(p, metric+"_"+base); err != nil {
						return files, err
					}
				}
			}
			if len(s.CDF) > 0 {
				for _, x := range xs {
					p := plot.New()
					p.Title.Text = titleOf(ds, v, "error CDF"+xSuffix(s, x))
					p.X.Label.Text = "absolute error"
					p.Y.Label.Text = "fraction of test ratings"
					drawn := false
					for k, m := range o.Plan.Methods {
						g := findGroup(gs, ds, v, x, m)
						if pts := meanSeries(g, func(r *Record) []Num { return r.CDF }, s.CDF); len(pts) > 0 {
							if err := addSeries(p, k, m.label(), pts, nil); err != nil {
								return files, err
							}
							drawn = true
						}
					}
					if drawn {
						if err := save(p, "cdf_"+base+xFile(x)); err != nil {
							return files, err
						}
					}
				}
			}
			if s.Curves {
				for _, x := range xs {
					p := plot.New()
					p.Title.Text = titleOf(ds, v, "training RMSE per epoch"+xSuffix(s, x))
					p.X.Label.Text = "epoch"
					p.Y.Label.Text = "training RMSE"
					drawn := false
					for k, m := range o.Plan.Methods {
						g := findGroup(gs, ds, v, x, m)
						if pts := meanSeries(g, func(r *Record) []Num { return r.Curve }, nil); len(pts) > 0 {
							if err := addSeries(p, k, m.label(), pts, nil); err != nil {
								return files, err
							}
							drawn = true
						}
					}
					if drawn {
						if err := save(p, "curve_"+base+xFile(x)); err != nil {
							return files, err
						}
					}
				}
			}
		}
	}
	return files, nil
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
