// Package tuning holds what the packages' manual hyperparameter searches
// share: the PRIVREC_TUNE switch and the validation split carved from the
// training part of a dataset, so that a search never reads a test rating.
package tuning

import (
	"os"
	"strings"
	"testing"

	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/ratings"
)

// ML100K skips t unless PRIVREC_TUNE is set (usage says to what), and
// returns which searches it names ("all", or a comma list of names) and
// ML-100K split 80/20 with seed 1, exactly as `privrec evaluate --split
// random:0.8 --seed 1` does (outer), with that training part split again
// 80/20 with seed 2 into fit and validation (val). The searches fit on
// val.Train and score on val.Test; outer.Test is for nothing here.
func ML100K(t *testing.T, usage string) (want func(name string) bool, outer, val ratings.Split) {
	t.Helper()
	which := os.Getenv("PRIVREC_TUNE")
	if which == "" {
		t.Skip(usage)
	}
	want = func(s string) bool { return which == "all" || strings.Contains(which, s) }
	d, _, err := ratings.Load(testdata.Path(t, "ml-100k/u.data"), ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if outer, err = ratings.Holdout(d, 0.8, 1); err != nil {
		t.Fatal(err)
	}
	if val, err = ratings.Holdout(outer.Train, 0.8, 2); err != nil {
		t.Fatal(err)
	}
	return want, outer, val
}
