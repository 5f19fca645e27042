package itemmeta

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/ratings"
)

// catalog is six items: three dramas of the 1990s, two comedies of the
// 1950s and one item without features.
const catalog = `item	kind:value
a	genre:Drama|decade:1990
b	genre:Drama|decade:1990
c	genre:Drama|genre:Romance|decade:1990
d	genre:Comedy|decade:1950
e	genre:Comedy|decade:1950
`

var ids = []string{"a", "b", "c", "d", "e", "f"}

func mustParse(t *testing.T, text string) *Features {
	t.Helper()
	f, err := Parse(text, "features.tsv", ids)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		field      string
		noFeatures bool
	}{
		{"no separator", "a\tgenre:Drama\nb\n", 2, "", false},
		{"empty feature", "a\tgenre:Drama||decade:1990\n", 1, "features", false},
		{"empty kind", "a\tgenre:Drama\n\nb\t:x\n", 3, "features", false},
		{"empty value", "# comment\na\tgenre:\n", 2, "features", false},
		{"no item known", "x\tgenre:Drama\n", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.text, "features.tsv", ids)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.noFeatures {
				if !errors.Is(err, ErrNoFeatures) || !strings.Contains(err.Error(), "features.tsv") {
					t.Errorf("error %q: want ErrNoFeatures naming the file", err)
				}
				return
			}
			var pe *ratings.ParseError
			if !errors.As(err, &pe) || pe.File != "features.tsv" || pe.Line != tc.line || pe.Field != tc.field {
				t.Errorf("error %q (%#v): want file features.tsv, line %d, field %q", err, pe, tc.line, tc.field)
			}
		})
	}
}

func TestFromDatasetErrors(t *testing.T) {
	d := &ratings.Dataset{Name: "toy", ItemIDs: ids}
	if _, err := FromDataset(d); !errors.Is(err, ErrNoFeatures) {
		t.Errorf("no side files: %v, want ErrNoFeatures", err)
	}
	bad := ratings.ItemSideSource("movies.csv", func() ([]byte, error) {
		return []byte("movieId,title,genres\n1,Toy Story (1995),Comedy\n2\n"), nil
	})
	d.Side = bad
	_, err := FromDataset(d)
	var pe *ratings.ParseError
	if !errors.As(err, &pe) || pe.File != "movies.csv" || pe.Line != 3 {
		t.Errorf("malformed movies.csv: %v, want a ParseError at movies.csv:3", err)
	}
}

func TestFromSide(t *testing.T) {
	side := &ratings.Side{Genres: []string{"Drama", "Comedy"}, Items: map[string]ratings.ItemSide{
		"a": {Genres: []int16{0}, Year: 1994}, "d": {Genres: []int16{1, 0}, Year: 1957}, "f": {}}}
	f := FromSide(side, ids)
	if f.NumItems() != 6 || f.Covered() != 2 {
		t.Fatalf("%d items, %d covered; want 6, 2", f.NumItems(), f.Covered())
	}
	var got []string
	for _, t := range f.items[3] {
		got = append(got, f.Names[t])
	}
	slices.Sort(got)
	if want := []string{"decade:1950", "genre:Comedy", "genre:Drama"}; !slices.Equal(got, want) {
		t.Errorf("item d: %v, want %v", got, want)
	}
}

func TestProfileScores(t *testing.T) {
	f := mustParse(t, catalog)
	// A drama lover: the unseen drama c outranks the comedies, and the
	// item without features scores 0 (neutral).
	s := f.Scores(f.Profile([]int32{0, 1}), nil)
	if !(s[2] > 0 && s[3] < 0 && s[4] < 0 && s[5] == 0) {
		t.Errorf("drama history: scores %v, want c > 0 > d, e and f = 0", s)
	}
	// No history: every score 0.
	for i, v := range f.Scores(f.Profile(nil), nil) {
		if v != 0 {
			t.Errorf("empty history: item %d scores %v, want 0", i, v)
		}
	}
}

func TestBlend(t *testing.T) {
	f := mustParse(t, catalog)
	private := []float32{5, 4, 1, 3, 2, float32(math.NaN())}
	for _, tc := range []struct {
		name    string
		history []int32
		weight  float64
		same    bool
	}{
		{"weight 0", []int32{0}, 0, true},
		{"no history", nil, 1, true},
		{"history, weight 1", []int32{0}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := f.Scores(f.Profile(tc.history), nil)
			got := Blend(slices.Clone(private), pub, tc.history, tc.weight)
			equal := true
			for i := range got {
				if got[i] != private[i] && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(private[i]))) {
					equal = false
				}
			}
			if equal != tc.same {
				t.Errorf("Blend = %v, private %v: equal %v, want %v", got, private, equal, tc.same)
			}
			if !math.IsNaN(float64(got[5])) {
				t.Errorf("NaN private score became %v", got[5])
			}
		})
	}
	// A drama lover with a large weight: the drama c (private 1) overtakes
	// the comedy d (private 3).
	h := []int32{0, 1}
	got := Blend(slices.Clone(private), f.Scores(f.Profile(h), nil), h, 10)
	if !(got[2] > got[3]) {
		t.Errorf("weight 10: c %v ≤ d %v", got[2], got[3])
	}
	// Constant private scores: the public ones order the list.
	flat := []float32{1, 1, 1, 1, 1, 1}
	got = Blend(flat, f.Scores(f.Profile(h), nil), h, 0.1)
	if !(got[2] > got[5] && got[5] > got[3]) {
		t.Errorf("flat private: %v, want c > f > d", got)
	}
}

// stubScorer scores item i as i for every user and counts its calls.
type stubScorer struct{}

func (stubScorer) ScoreItems(_ int32, dst []float32) []float32 {
	dst = slices.Grow(dst[:0], 6)[:6]
	for i := range dst {
		dst[i] = float32(i)
	}
	return dst
}

// TestOwnHistoryOnly checks that a user's re-ranked list depends on their
// own history and the public features only: changing every other user's
// ratings leaves it unchanged.
func TestOwnHistoryOnly(t *testing.T) {
	f := mustParse(t, catalog)
	build := func(others [][2]int32) *ratings.Dataset {
		d := &ratings.Dataset{Scale: ratings.Scale{Min: 1, Max: 5}, UserIDs: []string{"me", "u1", "u2"}, ItemIDs: ids}
		for _, i := range []int32{0, 1} {
			d.Users, d.Items, d.Values = append(d.Users, 0), append(d.Items, i), append(d.Values, 5)
		}
		for _, r := range others {
			d.Users, d.Items, d.Values = append(d.Users, r[0]), append(d.Items, r[1]), append(d.Values, 4)
		}
		return d
	}
	scores := func(d *ratings.Dataset) []float32 {
		byU := d.ByUser()
		s := &Scorer{Base: stubScorer{}, Features: f, Weight: 1, History: func(u int32) []int32 {
			idx, _ := byU.Row(int(u))
			return idx
		}}
		return s.ScoreItems(0, nil)
	}
	want := scores(build([][2]int32{{1, 3}, {1, 4}, {2, 2}}))
	for _, others := range [][][2]int32{nil, {{1, 0}, {2, 1}, {2, 3}, {2, 4}, {2, 5}}, {{2, 3}}} {
		if got := scores(build(others)); !slices.Equal(got, want) {
			t.Errorf("others %v: scores %v, want %v", others, got, want)
		}
	}
	if slices.Equal(want, stubScorer{}.ScoreItems(0, nil)) {
		t.Error("the re-ranking changed nothing: the test would not notice a leak")
	}
}

// TestFitWeight checks that the fitted weight leans on the public score
// when the private scores do not predict the user's history, and on the
// private scores when they do.
func TestFitWeight(t *testing.T) {
	const n = 200
	var sb strings.Builder
	many := make([]string, n)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
		g := "Drama"
		if i%2 == 1 {
			g = "Comedy"
		}
		fmt.Fprintf(&sb, "%s\tgenre:%s\n", many[i], g)
	}
	f, err := Parse(sb.String(), "many.tsv", many)
	if err != nil {
		t.Fatal(err)
	}
	// The history: 20 dramas and 4 comedies.
	var history []int32
	for i := int32(0); i < 40; i += 2 {
		history = append(history, i)
	}
	history = append(history, 1, 3, 5, 7)
	r := rand.New(rand.NewPCG(1, 2))
	noise, signal := make([]float32, n), make([]float32, n)
	for i := range noise {
		noise[i] = float32(r.NormFloat64())
		signal[i] = float32(r.NormFloat64())
	}
	for _, i := range history {
		signal[i] += 3
	}
	for _, tc := range []struct {
		name     string
		private  []float32
		history  []int32
		min, max float64
	}{
		{"no history", noise, nil, 0, 0},
		{"constant private", make([]float32, n), history, maxWeight, maxWeight},
		{"private is noise", noise, history, 2, maxWeight},
		{"private predicts the history", signal, history, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.FitWeight(tc.private, tc.history)
			t.Logf("weight %.3g", w)
			if !(w >= tc.min && w <= tc.max) {
				t.Errorf("weight %v, want in [%v, %v]", w, tc.min, tc.max)
			}
		})
	}
}

func TestNoiseFloor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scores []float32
		want   float64
	}{
		{"none negative", []float32{0, 1, 2}, 0},
		{"one negative", []float32{-3, 5, 9}, 3},
		{"rms of negatives", []float32{-1, -7, 100}, 5},
	} {
		if got := NoiseFloor(tc.scores); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: NoiseFloor = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Half-normal noise around zero: the estimate is the noise's deviation.
	r := rand.New(rand.NewPCG(1, 2))
	s := make([]float32, 20000)
	for i := range s {
		s[i] = float32(2 * r.NormFloat64())
	}
	if got := NoiseFloor(s); math.Abs(got-2) > 0.05 {
		t.Errorf("NoiseFloor of N(0, 2²) noise = %v, want 2 ± 0.05", got)
	}
}

// TestRerankPopularityGuard checks that an item whose released popularity
// is within the noise cannot ride the public features to the top of a
// popularity list, while the unguarded Rerank lets it: the drama c has a
// noisy count of 0.1 (noise σ = 1, from the negative counts of d and e),
// a drama lover's history is a and b, and the popular item f has no
// features.
func TestRerankPopularityGuard(t *testing.T) {
	f := mustParse(t, catalog)
	h := []int32{0, 1}
	pop := []float32{20, 18, 0.1, -1, -1, 6}
	plain := f.Rerank(slices.Clone(pop), h, 10)
	guarded := f.RerankPopularity(slices.Clone(pop), h, 10)
	if !(plain[2] > plain[5]) {
		t.Fatalf("unguarded: c %v ≤ f %v; the test's premise (the public score can lift c) fails", plain[2], plain[5])
	}
	if !(guarded[5] > guarded[2]) {
		t.Errorf("guarded: c %v ≥ f %v: an item within the noise topped a popular one", guarded[2], guarded[5])
	}
	// Without noise (no negative count) the guard is off: RerankPopularity
	// is Rerank.
	clean := []float32{20, 18, 0.1, 1, 1, 6}
	a, b := f.Rerank(slices.Clone(clean), h, 10), f.RerankPopularity(slices.Clone(clean), h, 10)
	if !slices.Equal(a, b) {
		t.Errorf("no noise seen: RerankPopularity %v, Rerank %v; want equal", b, a)
	}
}
