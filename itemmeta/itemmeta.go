// Package itemmeta re-ranks a recommender's list on the device with the
// catalog's public item metadata (genres, release era, or any item feature
// file) and the user's own history.
//
// Privacy: everything here is post-processing. Features come only from
// public item metadata (the movies file of a MovieLens set, or a file the
// user supplies) and never from ratings; a Profile reads only the history
// of the user it is for, which stays on the device; Blend combines that
// with scores a private model has already released. So a re-ranked list
// has exactly the (ε, δ) of the private model it starts from, and reveals
// nothing about any other user.
//
// The public score of item i for user u is a naive-Bayes log-likelihood
// ratio: for each kind of feature (genre, decade, ...), the mean over the
// item's features t of log(q_u(t)/q₀(t)), summed over kinds, where q₀ is
// the feature's share of the catalog and q_u the user's share, smoothed
// toward q₀ by a Dirichlet prior of PriorItems items. Blend standardizes
// the private and the public scores over the user's candidate items and
// adds them, the public one times a weight w: w = 0 (or a user without
// history) leaves the private list unchanged. FitWeight sets w for each
// user on the device, from that user's history alone: how well each score
// predicts which items the user chose, so that the public features count
// for much where the private scores are noise or carry no
// personalisation (DP popularity) and for little where they are strong.
package itemmeta

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/privrec/privrec/ratings"
)

// PriorItems is the strength of the prior that smooths a user's feature
// shares toward the catalog's, in items: a user with n items of a kind
// weighs their own shares by n/(n+PriorItems). It is fixed, not fitted.
const PriorItems = 10

// ErrNoFeatures is wrapped by every error about missing public features.
var ErrNoFeatures = errors.New("itemmeta: no public item features")

// Features holds the public features of a catalog's items, by the item
// index of a dataset or model.
type Features struct {
	// Names names every feature as "kind:value", such as "genre:Drama" or
	// "decade:1990".
	Names []string
	// kind is each feature's kind, an index of kinds.
	kind  []int
	kinds []string
	// items holds each item's features, sorted; nil for an item without.
	items [][]int32
	// prior is each feature's share of the catalog within its kind.
	prior []float64
	// withFeatures counts the items that have at least one feature.
	withFeatures int
}

// NumItems returns the number of items the features index.
func (f *Features) NumItems() int { return len(f.items) }

// Covered returns the number of items with at least one feature.
func (f *Features) Covered() int { return f.withFeatures }

// builder collects features by name.
type builder struct {
	f     *Features
	index map[string]int32
}

func newBuilder(n int) *builder {
	return &builder{f: &Features{items: make([][]int32, n)}, index: map[string]int32{}}
}

// add gives item i the feature kind:value.
func (b *builder) add(i int, kind, value string) {
	name := kind + ":" + value
	t, ok := b.index[name]
	if !ok {
		t = int32(len(b.f.Names))
		b.index[name] = t
		b.f.Names = append(b.f.Names, name)
		k := slices.Index(b.f.kinds, kind)
		if k < 0 {
			k = len(b.f.kinds)
			b.f.kinds = append(b.f.kinds, kind)
		}
		b.f.kind = append(b.f.kind, k)
	}
	if !slices.Contains(b.f.items[i], t) {
		b.f.items[i] = append(b.f.items[i], t)
	}
}

// finish sorts each item's features and computes the catalog shares.
func (b *builder) finish() *Features {
	f := b.f
	f.prior = make([]float64, len(f.Names))
	perKind := make([]int, len(f.kinds))
	for _, ts := range f.items {
		if len(ts) == 0 {
			continue
		}
		f.withFeatures++
		slices.Sort(ts)
		clear(perKind)
		for _, t := range ts {
			perKind[f.kind[t]]++
		}
		for _, t := range ts {
			f.prior[t] += 1 / float64(perKind[f.kind[t]])
		}
	}
	total := make([]float64, len(f.kinds))
	for t, p := range f.prior {
		total[f.kind[t]] += p
	}
	for t := range f.prior {
		f.prior[t] /= total[f.kind[t]]
	}
	return f
}

// FromSide returns the features "genre:G" and "decade:D" of the items
// itemIDs (a dataset's or model's ItemIDs, in index order) from a
// dataset's public item attributes; user attributes are never read.
func FromSide(side *ratings.Side, itemIDs []string) *Features {
	b := newBuilder(len(itemIDs))
	for i, id := range itemIDs {
		it, ok := side.Items[id]
		if !ok {
			continue
		}
		for _, g := range it.Genres {
			if int(g) < len(side.Genres) {
				b.add(i, "genre", side.Genres[g])
			}
		}
		if it.Year > 0 {
			b.add(i, "decade", fmt.Sprint(it.Year/10*10))
		}
	}
	return b.finish()
}

// FromDataset returns the public item features of d's side files (u.item,
// movies.dat, movies.csv; see ratings.SideFiles) for d's items. A
// malformed file is an error naming it, its line and field; a dataset
// without an item file is an error wrapping ErrNoFeatures.
func FromDataset(d *ratings.Dataset) (*Features, error) {
	if d.Side == nil {
		return nil, fmt.Errorf("%w: dataset %q has no item file (u.item, movies.dat, movies.csv) beside its ratings; give a features file", ErrNoFeatures, d.Name)
	}
	side, err := d.Side.Features()
	if err != nil {
		return nil, err
	}
	if side.Items == nil {
		return nil, fmt.Errorf("%w: dataset %q has no item file (looked for %s)", ErrNoFeatures, d.Name, strings.Join(d.Side.Want, ", "))
	}
	f := FromSide(side, d.ItemIDs)
	if f.withFeatures == 0 {
		return nil, fmt.Errorf("%w: the item file of dataset %q names none of its %d items", ErrNoFeatures, d.Name, len(d.ItemIDs))
	}
	return f, nil
}

// Parse reads a user's item feature file: one item a line, its ID, a tab
// (or comma), and its features separated by "|", each "kind:value" or a
// bare value (kind "feature"); blank lines and lines starting with "#" are
// skipped, and a first line "item..." is a header. Items not in itemIDs
// are ignored, items not in the file have no features. name names the
// file in errors, which are *ratings.ParseError with its line and field.
func Parse(text, name string, itemIDs []string) (*Features, error) {
	index := make(map[string]int, len(itemIDs))
	for i, id := range itemIDs {
		index[id] = i
	}
	b := newBuilder(len(itemIDs))
	bad := func(n int, field, format string, args ...any) error {
		return &ratings.ParseError{File: name, Line: n, Field: field, Err: fmt.Errorf(format+": %w", append(args, ratings.ErrSyntax)...)}
	}
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		s := strings.TrimSpace(line)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		sep := "\t"
		if !strings.Contains(line, "\t") {
			sep = ","
		}
		id, feats, ok := strings.Cut(line, sep)
		id = strings.TrimSpace(id)
		if n == 1 && strings.HasPrefix(strings.ToLower(id), "item") {
			continue
		}
		if !ok || id == "" {
			return nil, bad(n, "", "want item ID, a tab or comma, then features separated by |")
		}
		i, known := index[id]
		for _, ft := range strings.Split(feats, "|") {
			ft = strings.TrimSpace(ft)
			if ft == "" {
				return nil, bad(n, "features", "empty feature in %q", feats)
			}
			kind, value, hasKind := strings.Cut(ft, ":")
			if !hasKind {
				kind, value = "feature", ft
			}
			kind, value = strings.TrimSpace(kind), strings.TrimSpace(value)
			if kind == "" || value == "" {
				return nil, bad(n, "features", "feature %q: want kind:value or a value", ft)
			}
			if known {
				b.add(i, kind, value)
			}
		}
	}
	f := b.finish()
	if f.withFeatures == 0 {
		return nil, fmt.Errorf("%w: %s names none of the %d items", ErrNoFeatures, name, len(itemIDs))
	}
	return f, nil
}

// Profile is one user's affinity to each feature, log(q_u(t)/q₀(t)),
// computed on the device from that user's own history only.
type Profile struct {
	llr []float64
	// count is each feature's weighted count in the history and perKind
	// the number of history items with a feature of each kind.
	count, perKind []float64
	// Items is the number of history items with at least one feature; 0
	// means the profile is neutral (every affinity 0).
	Items int
}

// Profile returns the affinity of a user whose history is the item
// indices history (their own ratings; out-of-range indices are ignored).
// It reads nothing else but the public features.
func (f *Features) Profile(history []int32) Profile {
	count := make([]float64, len(f.Names))
	perKind := make([]float64, len(f.kinds))
	inKind := make([]int, len(f.kinds))
	p := Profile{llr: make([]float64, len(f.Names)), count: count, perKind: perKind}
	for _, i := range history {
		if i < 0 || int(i) >= len(f.items) || len(f.items[i]) == 0 {
			continue
		}
		p.Items++
		clear(inKind)
		for _, t := range f.items[i] {
			inKind[f.kind[t]]++
		}
		for k, c := range inKind {
			if c > 0 {
				perKind[k]++
			}
		}
		for _, t := range f.items[i] {
			count[t] += 1 / float64(inKind[f.kind[t]])
		}
	}
	for t := range f.prior {
		p.llr[t] = f.affinity(t, count[t], perKind[f.kind[t]])
	}
	return p
}

// affinity is log(q_u(t)/q₀(t)) for a feature with weighted count c in a
// history of n items with a feature of its kind.
func (f *Features) affinity(t int, c, n float64) float64 {
	q0 := f.prior[t]
	if q0 <= 0 {
		return 0
	}
	return math.Log((c + PriorItems*q0) / (n + PriorItems) / q0)
}

// leaveOut returns the public score item i would have if it were left out
// of the history p was computed from (i must be in it).
func (f *Features) leaveOut(p Profile, i int32) float64 {
	ts := f.items[i]
	var s float64
	for k := range f.kinds {
		c, sum := 0, 0.0
		for _, t := range ts {
			if f.kind[t] == k {
				c++
			}
		}
		if c == 0 {
			continue
		}
		for _, t := range ts {
			if f.kind[t] == k {
				sum += f.affinity(int(t), p.count[t]-1/float64(c), p.perKind[k]-1)
			}
		}
		s += sum / float64(c)
	}
	return s
}

// maxWeight bounds FitWeight's weight: beyond it the private scores only
// break ties.
const maxWeight = 100

// FitWeight returns the weight of the public score in Blend for one user,
// fitted on the device from that user's own history: a logistic
// regression of "item i is in the history" on the standardized private
// score and the standardized public score (each history item's public
// score computed with the item left out of the profile), whose
// coefficients β_private and β_public give the weight β_public/β_private,
// clamped to [0, 100] (100 when the private scores do not predict the
// history at all). It is 0 without history. The private scores of
// history items should not have been fitted to them (true of
// item-item and popularity scores); where they were (a user's fitted
// factors), the private score looks stronger and the weight is smaller.
// It reads only the user's history, the released scores and the public
// features: post-processing, no ε.
func (f *Features) FitWeight(private []float32, history []int32) float64 {
	p := f.Profile(history)
	if p.Items == 0 {
		return 0
	}
	pub := f.Scores(p, nil)
	in := make([]bool, len(private))
	for _, i := range history {
		if i >= 0 && int(i) < len(private) && !in[i] {
			in[i] = true
			if int(i) < len(f.items) && len(f.items[i]) > 0 {
				pub[i] = float32(f.leaveOut(p, i))
			}
		}
	}
	// Standardize both scores over the items with a finite private score.
	var n, mp, mq, vp, vq float64
	for i, v := range private {
		if x := float64(v); !math.IsNaN(x) && !math.IsInf(x, 0) {
			n++
			mp += x
			mq += float64(pub[i])
		}
	}
	if n < 3 {
		return 0
	}
	mp, mq = mp/n, mq/n
	for i, v := range private {
		if x := float64(v); !math.IsNaN(x) && !math.IsInf(x, 0) {
			vp += (x - mp) * (x - mp)
			vq += (float64(pub[i]) - mq) * (float64(pub[i]) - mq)
		}
	}
	sp, sq := math.Sqrt(vp/n), math.Sqrt(vq/n)
	if !(sq > 0) {
		return 0
	}
	if !(sp > 0) {
		return maxWeight
	}
	// Newton's method on the log-likelihood, with a unit ridge on the two
	// slopes (not the intercept) for a history that one score separates.
	var b [3]float64
	for range 30 {
		var g [3]float64
		var h [3][3]float64
		for i, v := range private {
			x := float64(v)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			z := [3]float64{1, (x - mp) / sp, (float64(pub[i]) - mq) / sq}
			eta := b[0] + b[1]*z[1] + b[2]*z[2]
			mu := 1 / (1 + math.Exp(-eta))
			y := 0.0
			if in[i] {
				y = 1
			}
			w := max(mu*(1-mu), 1e-12)
			for a := range 3 {
				g[a] += (y - mu) * z[a]
				for c := range 3 {
					h[a][c] += w * z[a] * z[c]
				}
			}
		}
		for a := 1; a < 3; a++ {
			g[a] -= b[a]
			h[a][a]++
		}
		d, ok := solve3(h, g)
		if !ok {
			break
		}
		for a := range b {
			b[a] += d[a]
		}
		if math.Abs(d[0])+math.Abs(d[1])+math.Abs(d[2]) < 1e-6 {
			break
		}
	}
	switch {
	case !(b[2] > 0):
		return 0
	case !(b[1] > 0) || b[2] >= maxWeight*b[1]:
		return maxWeight
	}
	return b[2] / b[1]
}

// solve3 solves h·d = g for a symmetric positive definite 3×3 h.
func solve3(h [3][3]float64, g [3]float64) ([3]float64, bool) {
	// Gaussian elimination with partial pivoting.
	a := [3][4]float64{}
	for r := range 3 {
		a[r] = [4]float64{h[r][0], h[r][1], h[r][2], g[r]}
	}
	for c := range 3 {
		piv := c
		for r := c + 1; r < 3; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		if math.Abs(a[piv][c]) < 1e-300 {
			return [3]float64{}, false
		}
		a[c], a[piv] = a[piv], a[c]
		for r := range 3 {
			if r != c {
				m := a[r][c] / a[c][c]
				for k := c; k < 4; k++ {
					a[r][k] -= m * a[c][k]
				}
			}
		}
	}
	return [3]float64{a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]}, true
}

// Scores writes the public score of every item for profile p into dst
// (grown if short) and returns it: the sum over kinds of the mean
// affinity of the item's features of that kind; 0 for an item without
// features.
func (f *Features) Scores(p Profile, dst []float32) []float32 {
	if cap(dst) < len(f.items) {
		dst = make([]float32, len(f.items))
	}
	dst = dst[:len(f.items)]
	sum := make([]float64, len(f.kinds))
	cnt := make([]int, len(f.kinds))
	for i, ts := range f.items {
		clear(sum)
		clear(cnt)
		for _, t := range ts {
			sum[f.kind[t]] += p.llr[t]
			cnt[f.kind[t]]++
		}
		var s float64
		for k, c := range cnt {
			if c > 0 {
				s += sum[k] / float64(c)
			}
		}
		dst[i] = float32(s)
	}
	return dst
}

// Blend returns, in private (changed in place), the private scores
// re-ranked with the user's public scores: over the candidate items (those
// not in history, with a finite private score), each score is
// standardized to mean 0 and deviation 1, and the result is
// z_private + weight·z_public. The private list is returned unchanged
// when weight is 0, the history is empty, or the public scores do not
// vary over the candidates; if the private scores do not vary, the
// public ones order the list. NaN private scores stay NaN.
//
// It is post-processing of the released scores with the user's own
// history and public data: it costs no ε.
func Blend(private, public []float32, history []int32, weight float64) []float32 {
	return blend(private, public, history, weight, nil)
}

// blend is Blend with the public term of item i weighted by gain[i] too
// (nil: 1), after the standardization.
func blend(private, public []float32, history []int32, weight float64, gain []float64) []float32 {
	if weight == 0 || len(history) == 0 {
		return private
	}
	if len(public) != len(private) {
		panic(fmt.Sprintf("itemmeta.Blend: %d public scores for %d items", len(public), len(private)))
	}
	in := make(map[int32]bool, len(history))
	for _, i := range history {
		in[i] = true
	}
	var n, sp, sq, spp, sqq float64
	for i, v := range private {
		if in[int32(i)] || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			continue
		}
		x, y := float64(v), float64(public[i])
		n++
		sp += x
		spp += x * x
		sq += y
		sqq += y * y
	}
	if n < 2 {
		return private
	}
	mp, mq := sp/n, sq/n
	dp := math.Sqrt(max(spp/n-mp*mp, 0))
	dq := math.Sqrt(max(sqq/n-mq*mq, 0))
	if !(dq > 1e-12*max(1, math.Abs(mq))) {
		return private
	}
	if !(dp > 1e-12*max(1, math.Abs(mp))) {
		dp, mp = math.Inf(1), 0 // the private scores carry no order
	}
	for i, v := range private {
		if math.IsNaN(float64(v)) {
			continue
		}
		w := weight
		if gain != nil {
			w *= gain[i]
		}
		private[i] = float32((float64(v)-mp)/dp + w*(float64(public[i])-mq)/dq)
	}
	return private
}

// Scorer is a ranking scorer that re-ranks Base's scores for each user
// with Features and the user's own history, read by History. It is safe
// for concurrent use when Base and History are.
type Scorer struct {
	// Base scores every item for a user (a ranking model's ScoreItems).
	Base interface {
		ScoreItems(u int32, dst []float32) []float32
	}
	// Features are the catalog's public features, indexed like Base's
	// items.
	Features *Features
	// History returns user u's own history (item indices).
	History func(u int32) []int32
	// Weight is the public score's weight in Blend; Auto fits it for each
	// user (FitWeight).
	Weight float64
	// Auto, when set, replaces Weight by each user's FitWeight.
	Auto bool
	// Popularity marks Base's scores as one noisy popularity list for
	// every user (a release without personalisation): the re-ranking is
	// RerankPopularity's, which keeps items within the noise from riding
	// the public features to the top.
	Popularity bool
}

// ScoreItems writes the re-ranked scores of every item for user u into
// dst and returns it.
func (s *Scorer) ScoreItems(u int32, dst []float32) []float32 {
	dst = s.Base.ScoreItems(u, dst)
	h, w := s.History(u), s.Weight
	if s.Auto {
		w = s.Features.FitWeight(dst, h)
	}
	if s.Popularity {
		return s.Features.RerankPopularity(dst, h, w)
	}
	return s.Features.Rerank(dst, h, w)
}

// Rerank returns a private model's scores of every item for one user
// (changed in place) re-ranked with the public features and that user's
// own history: Blend of scores with the history's public scores. It is
// the one call a device needs to show the re-ranked list (for example DP
// popularity re-ranked by public features, where a private release
// cannot carry personalisation), and costs no ε.
func (f *Features) Rerank(scores []float32, history []int32, weight float64) []float32 {
	if weight == 0 || len(history) == 0 {
		return scores
	}
	return Blend(scores, f.Scores(f.Profile(history), nil), history, weight)
}

// NoiseFloor estimates the standard deviation of the noise in released
// scores whose noise-free values are never negative, such as noisy item
// counts (DP popularity): every negative score is noise alone, and for
// symmetric noise the root mean square of the negative scores estimates
// the noise's deviation. It reads only the released scores (no ε); 0 when
// no score is negative (no noise seen, or none added).
func NoiseFloor(scores []float32) float64 {
	var n, ss float64
	for _, v := range scores {
		if v < 0 {
			n++
			ss += float64(v) * float64(v)
		}
	}
	if n == 0 {
		return 0
	}
	return math.Sqrt(ss / n)
}

// RerankPopularity is Rerank for scores that are one list for every user
// (DP popularity: noisy counts), with a guard for the items whose released
// popularity is within the noise: the public score of item i enters with
// the factor p_i²/(p_i²+σ²) (after Blend's standardization), where p_i = max(score_i, 0) and σ is
// NoiseFloor(scores). An item the release cannot tell from an unrated one
// (p_i ≲ σ) keeps its popularity rank and cannot be carried to the top of
// the list by the public features alone; a clearly popular item gets the
// whole public weight. Post-processing of released scores with the user's
// own history and public data: no ε.
func (f *Features) RerankPopularity(scores []float32, history []int32, weight float64) []float32 {
	if weight == 0 || len(history) == 0 {
		return scores
	}
	var gain []float64
	if sigma := NoiseFloor(scores); sigma > 0 {
		gain = make([]float64, len(scores))
		for i, v := range scores {
			p := max(float64(v), 0)
			gain[i] = p * p / (p*p + sigma*sigma)
		}
	}
	return blend(scores, f.Scores(f.Profile(history), nil), history, weight, gain)
}
