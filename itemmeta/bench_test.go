package itemmeta

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkRerank measures one user's on-device re-ranking over an
// ML-1M-sized catalog (3,706 items, 18 genres, 9 decades, 100 history
// items), with the weight fitted (FitWeight) and Rerank.
func BenchmarkRerank(b *testing.B) {
	const n = 3706
	r := rand.New(rand.NewPCG(1, 1))
	ids := make([]string, n)
	var sb strings.Builder
	for i := range ids {
		ids[i] = fmt.Sprint(i)
		fmt.Fprintf(&sb, "%d\tgenre:g%d|genre:g%d|decade:%d\n", i, r.IntN(18), r.IntN(18), 1920+10*r.IntN(9))
	}
	f, err := Parse(sb.String(), "bench.tsv", ids)
	if err != nil {
		b.Fatal(err)
	}
	history := make([]int32, 100)
	for k := range history {
		history[k] = int32(k * 37)
	}
	private := make([]float32, n)
	for i := range private {
		private[i] = float32(r.NormFloat64())
	}
	dst := make([]float32, n)
	b.ResetTimer()
	for range b.N {
		copy(dst, private)
		f.Rerank(dst, history, f.FitWeight(dst, history))
	}
}
