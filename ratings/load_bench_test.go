package ratings

import (
	"testing"

	"github.com/privrec/privrec/internal/testdata"
)

// BenchmarkLoadML1M loads the 1,000,209 ML-1M ratings from the shared
// ratings_uir_dense.tsv (11.5 MB).
func BenchmarkLoadML1M(b *testing.B) {
	path := testdata.Path(b, "ml-1m/ratings_uir_dense.tsv")
	for b.Loop() {
		d, _, err := Load(path, LoadOptions{NoTitles: true})
		if err != nil {
			b.Fatal(err)
		}
		if d.Len() != 1000209 {
			b.Fatalf("Len = %d, want 1000209", d.Len())
		}
	}
}
