package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/itemmeta"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// publicFlags are --public-features and --public-weight: a re-ranking of
// any method's list on the device with public item features.
type publicFlags struct {
	source    string
	weightArg string
	weight    float64 // parsed from weightArg by validate
	auto      bool    // weightArg is "auto"
}

func (p *publicFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.source, "public-features", "", `re-rank each user's list with public item features and the user's own history, at no privacy cost: "items" reads the genres and years of the dataset's movie file (u.item, movies.dat, movies.csv), anything else is a file of "item<TAB>kind:value|kind:value..." lines`)
	fs.StringVar(&p.weightArg, "public-weight", "auto", "with --public-features: weight of the standardized public score added to the standardized model score; auto: fitted on the device for each user from their own history (itemmeta.FitWeight); 0: the model's list")
}

// on reports whether --public-features was given.
func (p *publicFlags) on() bool { return p.source != "" }

// validate checks the flags.
func (p *publicFlags) validate() error {
	if p.auto = p.weightArg == "auto"; p.auto {
		return nil
	}
	w, err := strconv.ParseFloat(p.weightArg, 64)
	if err != nil || !(w >= 0) || math.IsInf(w, 0) {
		return fmt.Errorf("--public-weight %s: want auto or a finite number ≥ 0", p.weightArg)
	}
	p.weight = w
	return nil
}

// features loads the public features of train's items.
func (p *publicFlags) features(train *ratings.Dataset) (*itemmeta.Features, error) {
	return p.featuresFor(train.Name, train.ItemIDs, train.Side)
}

// featuresFor loads the public features of the items itemIDs: from side
// (the item file beside the ratings of dataset name) for "items", else
// from the --public-features file.
func (p *publicFlags) featuresFor(name string, itemIDs []string, side *ratings.SideSource) (*itemmeta.Features, error) {
	if p.source == "items" {
		f, err := itemmeta.FromDataset(&ratings.Dataset{Name: name, ItemIDs: itemIDs, Side: side})
		if err != nil {
			return nil, fmt.Errorf("--public-features items: %w", err)
		}
		return f, nil
	}
	data, err := os.ReadFile(p.source)
	if err != nil {
		return nil, fmt.Errorf("--public-features: %w", err)
	}
	f, err := itemmeta.Parse(string(data), p.source, itemIDs)
	if err != nil {
		return nil, fmt.Errorf("--public-features: %w", err)
	}
	return f, nil
}

// note says what the re-ranking is and what it costs.
func (p *publicFlags) note(f *itemmeta.Features) string {
	return fmt.Sprintf("public features (%s, %d of %d items described, weight %s): each user's list is re-ranked on the device with the public item features and the user's own history only; post-processing, no privacy cost; base_* metrics are the method's own list",
		p.source, f.Covered(), f.NumItems(), p.weightArg)
}

// forModel returns the re-ranking to apply to model m's lists and, for a
// model whose release carries no personalisation (m.Personalised false:
// one DP popularity list for everyone), a sentence naming the list's
// source. Such a list is re-ranked by the dataset's public item features
// (side, its movie file) even without --public-features, when it has
// them: DP popularity re-ranked on the device, at no privacy cost.
func (p publicFlags) forModel(m *model.Model, name string, itemIDs []string, side *ratings.SideSource) (publicFlags, string) {
	if m.Personalised() {
		return p, ""
	}
	const why = "the release carries no personalisation at this ε (dp-ease's own rule, from its released noise and roster)"
	if !p.on() {
		q := p.withSource("items")
		if _, err := q.featuresFor(name, itemIDs, side); err != nil {
			return p, "DP popularity: " + why + "; no public item features to re-rank it with (give --public-features FILE)"
		}
		p = q
	}
	return p, fmt.Sprintf("DP popularity re-ranked on the device by public item features (%s), guarded against items within the noise: %s", p.source, why)
}

// withSource returns p reading features from source with the fitted
// weight, unless p already has a weight of its own.
func (p publicFlags) withSource(source string) publicFlags {
	p.source = source
	if p.weightArg == "" {
		p.weightArg, p.auto = "auto", true
	}
	return p
}

// rerank returns s re-ranked with the public features of train's items and
// each user's own training history, and adds the metrics of s's own list
// to metrics under "base_" keys.
// A popularity model (pop: one list for every user) is re-ranked with
// RerankPopularity's guard.
func (p *publicFlags) rerank(s eval.Scorer, pop bool, train, test *ratings.Dataset, ks []int, relevant float64, metrics map[string][]float64) (eval.Scorer, string, error) {
	f, err := p.features(train)
	if err != nil {
		return nil, "", err
	}
	for _, r := range eval.RankAt(s, train, test, ks, float32(relevant), 0) {
		for key, v := range map[string]float64{"precision": r.Precision, "recall": r.Recall, "ndcg": r.NDCG,
			"coverage": r.Coverage, "rare": r.Rare} {
			if !math.IsNaN(v) {
				k := fmt.Sprintf("base_%s@%d", key, r.K)
				metrics[k] = append(metrics[k], v)
			}
		}
	}
	byU := train.ByUser()
	hist := func(u int32) []int32 {
		if int(u) >= byU.Rows() {
			return nil
		}
		idx, _ := byU.Row(int(u))
		return idx
	}
	return &itemmeta.Scorer{Base: s, Features: f, History: hist, Weight: p.weight, Auto: p.auto, Popularity: pop}, p.note(f), nil
}

// publicKeys returns the base_ metric keys of a report at cut-offs ks.
func publicKeys(r *evalReport) []string {
	if r.PublicNote == "" {
		return nil
	}
	var keys []string
	for _, k := range r.RankKs {
		keys = append(keys, fmt.Sprintf("base_recall@%d", k), fmt.Sprintf("base_ndcg@%d", k))
	}
	return keys
}

// recommend returns user's top n of m, leaving out the rated items, like
// m.RecommendUser; with --public-features the list is re-ranked with the
// public features (read from side for "items") and the rated items as
// the user's history, and Score is the re-ranked score.
func (p *publicFlags) recommend(note io.Writer, m *model.Model, side *ratings.SideSource, user string, n int, rated []string) ([]model.Recommendation, error) {
	q, source := p.forModel(m, "--data", m.ItemIDs, side)
	if source != "" {
		fmt.Fprintf(note, "privrec: the list is %s\n", source)
	}
	return q.recommendWith(note, m, side, user, n, rated)
}

// recommendWith is recommend with the re-ranking p.
func (p *publicFlags) recommendWith(note io.Writer, m *model.Model, side *ratings.SideSource, user string, n int, rated []string) ([]model.Recommendation, error) {
	if !p.on() {
		return m.RecommendUser(user, n, rated)
	}
	if m.ItemIDs == nil {
		return nil, fmt.Errorf("--public-features: the model has no item IDs")
	}
	if side == nil && p.source == "items" {
		return nil, fmt.Errorf("--public-features items: reads the item file beside --data's ratings; give --data, or a features file")
	}
	f, err := p.featuresFor("--data", m.ItemIDs, side)
	if err != nil {
		return nil, err
	}
	// The unranked list first: it checks the user and the model's kind.
	if _, err := m.RecommendUser(user, 1, rated); err != nil {
		return nil, err
	}
	u := int32(-1)
	if m.NumUsers > 0 {
		u, _ = m.UserIndex(user)
	}
	var hist []int32
	for _, id := range rated {
		if i, ok := m.ItemIndex(id); ok {
			hist = append(hist, i)
		}
	}
	slices.Sort(hist)
	hist = slices.Compact(hist)
	raw := m.ScoreItems(u, nil)
	w := p.weight
	if p.auto {
		w = f.FitWeight(raw, hist)
	}
	var score []float32
	if m.Personalised() {
		score = f.Rerank(slices.Clone(raw), hist, w)
	} else {
		score = f.RerankPopularity(slices.Clone(raw), hist, w)
	}
	var cand []int32
	for i := range score {
		if _, in := slices.BinarySearch(hist, int32(i)); !in && !math.IsNaN(float64(score[i])) {
			cand = append(cand, int32(i))
		}
	}
	slices.SortStableFunc(cand, func(a, b int32) int { return cmp.Compare(score[b], score[a]) })
	cand = cand[:min(n, len(cand))]
	recs := make([]model.Recommendation, len(cand))
	for k, i := range cand {
		recs[k] = model.Recommendation{Rank: k + 1, Item: m.ItemIDs[i], Score: score[i]}
		if !m.Ranking {
			r := m.Scale.Clamp(raw[i])
			recs[k].Rating = &r
		}
		if m.ItemTitles != nil {
			recs[k].Title = m.ItemTitles[i]
		}
	}
	fmt.Fprintf(note, "privrec: re-ranked on this device with public item features (%s, %d of %d items described, weight %.3g) and this user's own %d rated items; post-processing, no privacy cost; score is the re-ranked score\n",
		p.source, f.Covered(), f.NumItems(), w, len(hist))
	return recs, nil
}

// joinSources adds source to the list sources so far (runs of one
// evaluation may differ: a seed's release may carry personalisation that
// another's does not).
func joinSources(sofar, source string) string {
	if sofar == "" || strings.Contains(sofar, source) {
		return cmp.Or(sofar, source)
	}
	return sofar + "; in other runs: " + source
}
