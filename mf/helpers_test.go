package mf

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/privrec/privrec/internal/testdata"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// readTSV reads "user TAB item TAB rating [TAB ...]" lines into a dataset
// on the 1..5 star scale. When base is not nil, IDs are mapped through its
// index space and new IDs are appended to copies of its ID lists, so a
// test file shares the index space of its training file.
func readTSV(tb testing.TB, path string, base *ratings.Dataset) *ratings.Dataset {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	d := &ratings.Dataset{Name: path, Scale: ratings.Stars5}
	uidx, iidx := map[string]int32{}, map[string]int32{}
	if base != nil {
		d.UserIDs = append([]string(nil), base.UserIDs...)
		d.ItemIDs = append([]string(nil), base.ItemIDs...)
	}
	for k, id := range d.UserIDs {
		uidx[id] = int32(k)
	}
	for k, id := range d.ItemIDs {
		iidx[id] = int32(k)
	}
	look := func(m map[string]int32, ids *[]string, id string) int32 {
		if k, ok := m[id]; ok {
			return k
		}
		k := int32(len(*ids))
		m[id] = k
		*ids = append(*ids, id)
		return k
	}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		fs := strings.Split(sc.Text(), "\t")
		if len(fs) < 3 {
			tb.Fatalf("%s:%d: %d fields", path, line, len(fs))
		}
		r, err := strconv.ParseFloat(fs[2], 32)
		if err != nil {
			tb.Fatalf("%s:%d: %v", path, line, err)
		}
		d.Users = append(d.Users, look(uidx, &d.UserIDs, fs[0]))
		d.Items = append(d.Items, look(iidx, &d.ItemIDs, fs[1]))
		d.Values = append(d.Values, float32(r))
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return d
}

// ml1m loads MovieLens 1M or skips.
func ml1m(tb testing.TB) *ratings.Dataset {
	return readTSV(tb, testdata.Path(tb, "ml-1m/ratings_uir_dense.tsv"), nil)
}

// split returns a seeded random frac/(1−frac) split of d in d's index space.
func split(d *ratings.Dataset, frac float64, seed uint64) (train, test *ratings.Dataset) {
	perm := rng.New(seed, 99).Perm(d.Len())
	n := int(frac * float64(d.Len()))
	return d.Subset(perm[:n]), d.Subset(perm[n:])
}

// rmse returns the RMSE of m's clamped predictions on d.
func rmse(m *model.Model, d *ratings.Dataset) float64 {
	p := m.PredictAll(d, nil)
	var s float64
	for k, v := range d.Values {
		e := float64(p[k] - v)
		s += e * e
	}
	return math.Sqrt(s / float64(len(p)))
}
