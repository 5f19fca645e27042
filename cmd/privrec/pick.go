package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// easeMaxItems is the largest number of items on which recommend without
// --model trains ease; above it, ials. EASE inverts an items×items matrix
// (a single-threaded Cholesky, cubic in the items) and its model holds
// that matrix. Measured with privrec train --method ease on this 2-core
// machine, shared with other jobs (wall, CPU, peak memory): ML-100K
// (1,682 items) 1.3 s; ML-1M (3,706) 24 s, 17 s, 0.57 GB; ml-latest-small
// (9,724) 550 s, 346 s, 2.5 GB, 20 times ML-1M's CPU for 2.6 times the
// items (the cube is 18), so about 45 s of CPU at 5,000 items. ials took
// 67 s on ML-1M and 14 s on ml-latest-small (linear in the ratings).
const easeMaxItems = 5000

// Figures of docs/results/ranking.md and docs/results/private-topn.md
// (ML-1M, random 80/20 split, seed 1, relevant = rating ≥ 4): test
// Recall@20, quoted by recommend when it says why it chose a method.
const (
	r20EASE     = "0.3250" // ease, λ = 500 (its default)
	r20IALS     = "0.3162" // ials, defaults
	r20Pop      = "0.1439" // pop
	r20DPPop1   = "0.1436" // dp-pop, user-level ε = 1
	r20DPEASE1  = "0.1824" // dp-ease, user-level ε = 1, defaults by ε
	r20DPEASE10 = "0.2695" // dp-ease, user-level ε = 10, defaults by ε
	r20MF       = "0.0691" // mf, defaults (RMSE 0.8536)
	r20DPALS1   = "0.0460" // dp-als, user-level ε = 1 (RMSE 0.9331)
)

// rankingChoice is the method recommend trains when no --model is given,
// with its parameters and the reason, said on stderr.
type rankingChoice struct {
	method string
	params map[string]string
	why    string
}

// chooseRanking picks the best measured ranking method for a catalog of
// numItems items: with eps > 0, dp-ease at user-level (eps, delta); else
// ease, or ials above easeMaxItems items.
func chooseRanking(numItems int, eps, delta float64) rankingChoice {
	switch {
	case eps > 0:
		return rankingChoice{
			method: "dp-ease",
			params: map[string]string{"eps": strconv.FormatFloat(eps, 'g', -1, 64), "delta": strconv.FormatFloat(delta, 'g', -1, 64)},
			why: fmt.Sprintf("the best private ranking method measured: user-level (ε, δ) = (%g, %g) joint DP over the whole run "+
				"(unit: one user added or removed with all their ratings; trusted: the aggregator that adds the noise), "+
				"ML-1M Recall@20 %s at ε = 1 and %s at ε = 10 against dp-pop's %s (docs/results/private-topn.md); "+
				"it needs thousands of users to personalise, and with fewer lists DP popularity (re-ranked by public item features where the data has them) and says so", eps, delta, r20DPEASE1, r20DPEASE10, r20DPPop1),
		}
	case numItems <= easeMaxItems:
		return rankingChoice{
			method: "ease",
			why: fmt.Sprintf("the best ranking method measured, not private: ML-1M Recall@20 %s against ials %s and pop %s "+
				"(docs/results/ranking.md); --eps E trains dp-ease instead", r20EASE, r20IALS, r20Pop),
		}
	default:
		return rankingChoice{
			method: "ials",
			why: fmt.Sprintf("%d items is more than %d, above which ease (ML-1M Recall@20 %s, the best measured) is slow: "+
				"it inverts an items×items matrix, cubic in the items (ml-latest-small's 9,724: 9 minutes, 2.5 GB); ials is second "+
				"(Recall@20 %s, docs/results/ranking.md), not private; --eps E trains dp-ease instead",
				numItems, easeMaxItems, r20EASE, r20IALS),
		}
	}
}

// rankingNote is the one-line note recommend prints for a
// rating-prediction model m: how it ranks, and what ranks better.
func rankingNote(m *model.Model) string {
	return fmt.Sprintf("privrec: note: %s ranks by its raw predicted rating (no popularity prior); on ML-1M's ranking protocol "+
		"mf reached Recall@20 %s and dp-als (ε = 1) %s, against ease %s and dp-ease (ε = 1) %s (docs/results/ranking.md): "+
		"leave out --model to train ease, or dp-ease with --eps E", m.Method, r20MF, r20DPALS1, r20EASE, r20DPEASE1)
}

// withUser returns d with one more user, of a fresh ID, who rated the
// items of one (a one-user dataset indexed by d's items, from
// oneUserRatings), and that ID: "me", or "me-2", ... if d has a "me".
func withUser(d, one *ratings.Dataset) (*ratings.Dataset, string) {
	id := "me"
	for k := 2; slices.Contains(d.UserIDs, id); k++ {
		id = "me-" + strconv.Itoa(k)
	}
	out := *d
	u := int32(d.NumUsers())
	out.UserIDs = append(slices.Clip(d.UserIDs), id)
	out.Users = append(slices.Clip(d.Users), slices.Repeat([]int32{u}, one.Len())...)
	out.Items = append(slices.Clip(d.Items), one.Items...)
	out.Values = append(slices.Clip(d.Values), one.Values...)
	return &out, id
}

// trainRanking trains the method of c, at its defaults, on d; hook, when
// not nil, sees each epoch of a method that has epochs (ials).
func trainRanking(ctx context.Context, c rankingChoice, d *ratings.Dataset, hook method.Hook) (*model.Model, error) {
	s, err := method.Lookup(c.method)
	if err != nil {
		return nil, err
	}
	cfg, err := s.Configure(c.params)
	if err != nil {
		return nil, err
	}
	m, _, err := s.Fit(ctx, d, cfg, 1, hook)
	return m, err
}
