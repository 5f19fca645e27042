package dp

import (
	"math"
	"testing"

	"github.com/privrec/privrec/internal/kstest"
	"github.com/privrec/privrec/rng"
	"gonum.org/v1/gonum/stat/distuv"
)

func TestSamplersKS(t *testing.T) {
	gammaCDF := func(k, s float64) func(float64) float64 {
		return distuv.Gamma{Alpha: k, Beta: 1 / s}.CDF
	}
	tests := []struct {
		name       string
		draw       func(r *rngT) float64
		cdf, wrong func(float64) float64
	}{
		{"laplace", func(r *rngT) float64 { return SampleLaplace(r, 1.5) },
			kstest.LaplaceCDF(1.5), kstest.LaplaceCDF(1.5 * 0.7)},
		{"gamma shape 0.3", func(r *rngT) float64 { return SampleGamma(r, 0.3, 2) },
			gammaCDF(0.3, 2), gammaCDF(0.3, 2*0.5)},
		{"gamma shape 0.01", func(r *rngT) float64 { return SampleGamma(r, 0.01, 1) },
			gammaCDF(0.01, 1), gammaCDF(0.02, 1)},
		{"gamma shape 1", func(r *rngT) float64 { return SampleGamma(r, 1, 1) },
			gammaCDF(1, 1), gammaCDF(1, 0.85)},
		{"gamma shape 7.5", func(r *rngT) float64 { return SampleGamma(r, 7.5, 0.5) },
			gammaCDF(7.5, 0.5), gammaCDF(7.5, 0.5*0.7)},
		{"sphere K=3 coordinate", func(r *rngT) float64 {
			var v [3]float64
			FillSphere(r, v[:])
			return v[1]
		}, distuv.Uniform{Min: -1, Max: 1}.CDF, distuv.Uniform{Min: -0.7, Max: 0.7}.CDF},
		{"L2 laplace K=8 radius", func(r *rngT) float64 {
			var v [8]float64
			FillL2Laplace(r, 0.7, v[:])
			return math.Sqrt(dot(v[:], v[:]))
		}, gammaCDF(8, 0.7), gammaCDF(8, 0.7*0.7)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rng.New(42, uint64(i))
			checkKS(t, draw(ksN, func() float64 { return tc.draw(r) }), tc.cdf, tc.wrong)
		})
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestSamplerMoments(t *testing.T) {
	const n = 200000
	tests := []struct {
		name     string
		draw     func(r *rngT) float64
		mean, vr float64
	}{
		{"laplace", func(r *rngT) float64 { return SampleLaplace(r, 2) }, 0, 8},
		{"gamma 0.2", func(r *rngT) float64 { return SampleGamma(r, 0.2, 3) }, 0.6, 1.8},
		{"gamma 4", func(r *rngT) float64 { return SampleGamma(r, 4, 0.5) }, 2, 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rng.New(7, uint64(i))
			m, v := meanVar(draw(n, func() float64 { return tc.draw(r) }))
			// 5 standard errors; the variance's error uses a generous
			// kurtosis bound of 10.
			if se := math.Sqrt(tc.vr / n); math.Abs(m-tc.mean) > 5*se {
				t.Errorf("mean %.4f, want %.4f ± %.4f", m, tc.mean, 5*se)
			}
			if se := tc.vr * math.Sqrt(10.0/n); math.Abs(v-tc.vr) > 5*se {
				t.Errorf("variance %.4f, want %.4f ± %.4f", v, tc.vr, 5*se)
			}
		})
	}
}

func TestSphereUnitAndL2LaplaceDensity(t *testing.T) {
	r := rng.New(1)
	v := make([]float64, 10)
	for range 100 {
		FillSphere(r, v)
		if n := math.Sqrt(dot(v, v)); math.Abs(n-1) > 1e-12 {
			t.Fatalf("norm %v, want 1", n)
		}
	}
	FillSphere(r, nil) // no panic
}

func BenchmarkSamplers(b *testing.B) {
	r := rng.New(1)
	v := make([]float64, 16)
	benches := []struct {
		name string
		f    func()
	}{
		{"Laplace", func() { SampleLaplace(r, 1) }},
		{"Gamma/shape=0.01", func() { SampleGamma(r, 0.01, 1) }},
		{"Gamma/shape=3", func() { SampleGamma(r, 3, 1) }},
		{"GammaShare/n=100", func() { SampleGammaShare(r, 1, 100) }},
		{"MixShare/n=100", func() { SampleMixShare(r, 1, 0.7, 100) }},
		{"Sphere/K=16", func() { FillSphere(r, v) }},
		{"L2Laplace/K=16", func() { FillL2Laplace(r, 1, v) }},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				bb.f()
			}
		})
	}
}
