package hdpmf

import (
	"context"
	"math"
	"testing"

	"github.com/privrec/privrec/model"
)

// TestDeviceListEqualsRecommend: a device's model after a run and
// privrec recommend's fold-in of the same ratings into the published
// model (the table alone, as deploy publishes it) give the same top 10
// with the same scores, and those scores are predicted ratings near the
// scale, not the rescaled noise of rare items.
func TestDeviceListEqualsRecommend(t *testing.T) {
	train := tiny(t, 80)
	for _, v := range []Variant{HDPMF, HDPMFR, DPMF} {
		t.Run(v.String(), func(t *testing.T) {
			cfg := DefaultConfig(v)
			cfg.Rounds = 6
			m, _, err := Train(context.Background(), train, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pub := &model.Model{Dim: m.Dim, NumItems: m.NumItems, V: m.V,
				Default: (train.Scale.Min + train.Scale.Max) / 2, Scale: train.Scale}
			byUser := train.ByUser()
			for _, u := range []int{0, 7, 41} {
				items, vals := byUser.Row(u)
				f, err := pub.FoldIn("me", items, vals, FoldReg)
				if err != nil {
					t.Fatal(err)
				}
				dev, rec := m.Recommend(int32(u), 10, items), f.Recommend(0, 10, items)
				if len(dev) != 10 || len(rec) != 10 {
					t.Fatalf("user %d: %d and %d recommendations", u, len(dev), len(rec))
				}
				for r := range dev {
					if dev[r].Item != rec[r].Item || math.Abs(float64(dev[r].Score-rec[r].Score)) > 1e-4 {
						t.Fatalf("user %d rank %d: device item %d score %.5f, recommend item %d score %.5f",
							u, r+1, dev[r].Item, dev[r].Score, rec[r].Item, rec[r].Score)
					}
				}
				if v == HDPMF {
					// Predicted ratings: the top score within a star of the
					// scale's top (the noise rescaled by 1/γ gave 20–30).
					if s := dev[0].Score; !(s < train.Scale.Max+1) || !(s > train.Scale.Min) {
						t.Errorf("user %d: top score %.3f, outside (%g, %g)", u, s, train.Scale.Min, train.Scale.Max+1)
					}
				}
			}
		})
	}
}

// TestPosteriorTable: on synthetic releases with known noise, the table
// is closer to the true unstretched factors than v/γ, an item nobody
// rated gets the prior mean, and a noise-free item keeps its ratio.
func TestPosteriorTable(t *testing.T) {
	const ni, k = 400, 2
	v := make([]float32, ni*k)
	counts := make([]int32, ni)
	gamma := make([]float64, ni)
	nv := make([]float64, ni)
	truth := make([]float64, ni*k)
	for j := range ni {
		gamma[j] = 0.1 + 0.9*float64(j%7)/6
		counts[j] = int32(j % 50)
		nv[j] = 0.5 / float64(1+j%50)
		if j == 3 {
			nv[j] = 0 // noise-free
		}
		for d := range k {
			truth[j*k+d] = 1 + 0.5*math.Sin(float64(j*(d+3)))
			e := math.Sqrt(nv[j]) * math.Cos(float64(j*j+d)) * math.Sqrt2 // a deterministic stand-in for the noise
			v[j*k+d] = float32(gamma[j]*truth[j*k+d] + e)
		}
	}
	tab := posteriorTable(v, counts, gamma, k, nv)
	var eRaw, eTab float64
	for j := range ni {
		if counts[j] == 0 {
			continue
		}
		for d := range k {
			r := float64(v[j*k+d])/gamma[j] - truth[j*k+d]
			p := float64(tab[j*k+d]) - truth[j*k+d]
			eRaw += r * r
			eTab += p * p
		}
	}
	if !(eTab < eRaw/2) {
		t.Errorf("squared error of the table %.4g, of v/γ %.4g: want less than half", eTab, eRaw)
	}
	if got, want := tab[3*k], float32(float64(v[3*k])/gamma[3]); math.Abs(float64(got-want)) > 1e-5 {
		t.Errorf("noise-free item: %g, want its ratio %g", got, want)
	}
	if tab[0] != tab[50*k] || tab[1] != tab[50*k+1] {
		t.Errorf("items nobody rated: %v and %v, want the same prior mean", tab[0:k], tab[50*k:50*k+k])
	}
}

// TestPaperPredict: with PaperPredict the run publishes V itself and the
// model divides by the weights, as the paper predicts.
func TestPaperPredict(t *testing.T) {
	train := tiny(t, 40)
	cfg := DefaultConfig(HDPMF)
	cfg.Rounds, cfg.PaperPredict = 3, true
	m, _, err := Train(context.Background(), train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.UserWeight == nil || m.ItemWeight == nil || m.Offset != nil {
		t.Fatalf("paper prediction: weights %v/%v, offset %v; want the weights and no offset", m.UserWeight != nil, m.ItemWeight != nil, m.Offset != nil)
	}
	cfg.PaperPredict = false
	d, _, err := Train(context.Background(), train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.UserWeight != nil || d.Offset == nil {
		t.Fatalf("default: weights %v, offset %v; want no weights and an offset", d.UserWeight != nil, d.Offset != nil)
	}
}
