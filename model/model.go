package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/privrec/privrec/accountant/rdp"
	"github.com/privrec/privrec/internal/vec"
	"github.com/privrec/privrec/ratings"
)

// MaxDim is the largest latent dimension a model may have.
const MaxDim = 1 << 20

// Model is a trained factor model; see the package documentation for the
// prediction it makes. The slices are read-only once the model is in use.
type Model struct {
	// Dim is the latent dimension: the length of a row of U and V. It is 0
	// for a model without factors (the baselines).
	Dim int
	// NumUsers is the number of user rows. A model with NumUsers = 0 has
	// no user side: every user index is known and predicted alike.
	NumUsers int
	// NumItems is the number of item rows.
	NumItems int
	// U holds the user factors, row-major NumUsers×Dim.
	U []float32
	// V holds the item factors, row-major NumItems×Dim.
	V []float32
	// Mean is the global term added to every known pair's prediction (0 if
	// the method has none).
	Mean float32
	// BU holds the user biases, nil when the method has none.
	BU []float32
	// BI holds the item biases, nil when the method has none.
	BI []float32
	// Offset holds a per-user offset kept on the device (SDMF: the user's
	// mean training rating), nil when the method has none.
	Offset []float32
	// UserWeight holds HDPMF's user weights β: the interaction U[u]·V[i]
	// is divided by UserWeight[u]·ItemWeight[i]. Nil when none; set
	// together with ItemWeight.
	UserWeight []float32
	// ItemWeight holds HDPMF's item weights γ (see UserWeight), nil when
	// none.
	ItemWeight []float32
	// Rated marks the users that had training ratings; the others are
	// unknown. Nil means every user row is known.
	Rated []bool
	// Default is the prediction base for an unknown user or item (the
	// biases the model knows are added to it).
	Default float32
	// Ranking marks a model whose scores only rank items (BPR): Predict
	// returns the raw score, which is not a rating, and does not clamp it.
	Ranking bool
	// Scale is the rating scale; rating predictions are clamped to it.
	Scale ratings.Scale
	// UserIDs holds the original user IDs parallel to the rows of U, or
	// nil.
	UserIDs []string
	// ItemIDs holds the original item IDs parallel to the rows of V, or
	// nil.
	ItemIDs []string
	// ItemTitles holds item titles parallel to the rows of V, or nil.
	ItemTitles []string
	// UserItems, when not nil, marks a model whose user row is an
	// indicator of the user's history (dp-ease): coordinate k of a user
	// row is 1 when the user has item UserItems[k], and the last
	// coordinate (Dim = len(UserItems)+1) is the constant 1. A user the
	// model never saw is scored from their history alone (FoldInRanking).
	// The items are public: the server broadcast them.
	UserItems []int32
	// Method is the registry name of the method that trained the model
	// ("" if unknown).
	Method string
	// Config holds the method's hyperparameters as a JSON object, or nil.
	Config json.RawMessage
	// Privacy is the method's privacy claim and what training spent.
	Privacy Privacy
	// Release, when not nil, says which of a served run's releases the
	// model is; nil for a model trained in one piece.
	Release *Release

	// index maps IDs to rows, built on the first lookup.
	once  sync.Once
	users map[string]int32
	items map[string]int32
}

// Privacy is a method's privacy claim and what a run spent.
type Privacy struct {
	// Unit is what one protected change is: "rating value", "rating
	// existence", "user", or "none" for a non-private method.
	Unit string `json:"unit"`
	// Trusted names who sees raw data: "nobody" (untrusted server),
	// "the recommender" (a trusted curator), or "everyone".
	Trusted string `json:"trusted"`
	// EpsRound is the largest ε any protected unit spends in one round
	// (0 for a non-private method).
	EpsRound float64 `json:"eps_round"`
	// EpsTotal is the largest ε any protected unit spends over the whole
	// run, by the composition the method's proof uses.
	EpsTotal float64 `json:"eps_total"`
	// Delta is the largest δ of any unit in total (0 for pure ε-DP).
	Delta float64 `json:"delta"`
	// Note says how EpsTotal composes, or what the claim does not cover.
	Note string `json:"note,omitempty"`
	// Aggregation names how the server received the uploads, for methods
	// with a client/server protocol: "masked" (secure aggregation), "ideal"
	// (its ideal functionality, in process) or "off" (single uploads).
	Aggregation string `json:"aggregation,omitempty"`
	// Noise names the noise that ran: "skellam" (integer, distributed),
	// "gamma-shares", "mixture-shares", or "none".
	Noise string `json:"noise,omitempty"`
	// Releases lists, for a method accounted by a zCDP ledger, every
	// Gaussian release of the run that read the private data, with its
	// sensitivity, σ and ρ; EpsTotal is their composition at Delta.
	Releases []rdp.Release `json:"releases,omitempty"`
	// Neighbouring, when the method states it, names the neighbouring
	// relation EpsTotal holds for, such as "add/remove one user".
	Neighbouring string `json:"neighbouring,omitempty"`
	// EpsReplace, when not 0, is the total ε at Delta for neighbours that
	// replace one unit by another (same noise, sensitivities doubled),
	// when EpsTotal is for adding or removing one.
	EpsReplace float64 `json:"eps_replace_one,omitempty"`
}

// Release identifies one model a served run published. A run publishes
// its model as its rounds arrive (continual release), each release read by
// the users of the rounds so far, and its final model last. A release is
// post-processing of the aggregates the server already received: its ε is
// the run's spent so far (Model.Privacy), and it costs nothing more.
type Release struct {
	// Round is the last round whose aggregate the model reads.
	Round int `json:"round"`
	// Users counts the distinct users whose data the training rounds up
	// to Round read (a party that enrolled for several users counts
	// them all).
	Users int `json:"users"`
	// Final marks the run's final model; an interim release is followed
	// by others.
	Final bool `json:"final,omitempty"`
}

// Check reports whether m's fields are mutually consistent: dimensions in
// range and every slice of the length its field calls for. It does not
// require finite values.
func (m *Model) Check() error {
	nu, ni := m.NumUsers, m.NumItems
	lenOK := func(n, want int, isNil bool) bool { return isNil || n == want }
	switch {
	case m.Dim < 0 || m.Dim > MaxDim:
		return fmt.Errorf("Dim %d outside 0..%d", m.Dim, MaxDim)
	case nu < 0 || ni < 0 || int64(nu) > math.MaxUint32 || int64(ni) > math.MaxUint32:
		return fmt.Errorf("NumUsers %d, NumItems %d out of range", nu, ni)
	case len(m.U) != nu*m.Dim:
		return fmt.Errorf("len(U) = %d, want NumUsers×Dim = %d", len(m.U), nu*m.Dim)
	case len(m.V) != ni*m.Dim:
		return fmt.Errorf("len(V) = %d, want NumItems×Dim = %d", len(m.V), ni*m.Dim)
	case !lenOK(len(m.BU), nu, m.BU == nil):
		return fmt.Errorf("%d user biases for %d users", len(m.BU), nu)
	case !lenOK(len(m.BI), ni, m.BI == nil):
		return fmt.Errorf("%d item biases for %d items", len(m.BI), ni)
	case !lenOK(len(m.Offset), nu, m.Offset == nil):
		return fmt.Errorf("%d user offsets for %d users", len(m.Offset), nu)
	case (m.UserWeight == nil) != (m.ItemWeight == nil):
		return errors.New("UserWeight and ItemWeight must be set together")
	case !lenOK(len(m.UserWeight), nu, m.UserWeight == nil):
		return fmt.Errorf("%d user weights for %d users", len(m.UserWeight), nu)
	case !lenOK(len(m.ItemWeight), ni, m.ItemWeight == nil):
		return fmt.Errorf("%d item weights for %d items", len(m.ItemWeight), ni)
	case !lenOK(len(m.Rated), nu, m.Rated == nil):
		return fmt.Errorf("%d Rated flags for %d users", len(m.Rated), nu)
	case !lenOK(len(m.UserIDs), nu, m.UserIDs == nil):
		return fmt.Errorf("%d user IDs for %d users", len(m.UserIDs), nu)
	case !lenOK(len(m.ItemIDs), ni, m.ItemIDs == nil):
		return fmt.Errorf("%d item IDs for %d items", len(m.ItemIDs), ni)
	case !lenOK(len(m.ItemTitles), ni, m.ItemTitles == nil):
		return fmt.Errorf("%d item titles for %d items", len(m.ItemTitles), ni)
	case !(m.Scale.Min <= m.Scale.Max) || !(m.Scale.Step >= 0):
		return fmt.Errorf("bad scale %v", m.Scale)
	case m.UserItems != nil && m.Dim != len(m.UserItems)+1:
		return fmt.Errorf("%d user items for Dim %d, want Dim − 1", len(m.UserItems), m.Dim)
	case m.Release != nil && (m.Release.Round < 0 || m.Release.Users < 0):
		return fmt.Errorf("release of round %d, %d users: negative", m.Release.Round, m.Release.Users)
	}
	for _, i := range m.UserItems {
		if i < 0 || int(i) >= ni {
			return fmt.Errorf("user item %d outside [0, %d)", i, ni)
		}
	}
	if m.Config != nil {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(m.Config, &obj); err != nil || obj == nil {
			return fmt.Errorf("Config is not a JSON object: %.40q", m.Config)
		}
	}
	return nil
}

// userKnown reports whether u is a known user: a row with training
// ratings, or any index when the model has no user side.
func (m *Model) userKnown(u int32) bool {
	if m.NumUsers == 0 {
		return true
	}
	return u >= 0 && int(u) < m.NumUsers && (m.Rated == nil || m.Rated[u])
}

// itemKnown reports whether i is an item row.
func (m *Model) itemKnown(i int32) bool { return i >= 0 && int(i) < m.NumItems }

// hasUserTerms reports whether the user-side slices can be indexed by a
// known user.
func (m *Model) hasUserTerms() bool { return m.NumUsers > 0 }

// addsBias reports whether the bias step changes a prediction. Skipping it
// when it would add +0 keeps the sign of a zero interaction, so models
// without biases reproduce their old predictions bit for bit.
func (m *Model) addsBias() bool { return m.Mean != 0 || m.BU != nil || m.BI != nil }

// PredictRaw returns the unclamped prediction for user u and item i. An
// unknown user or item (see the package documentation) gets Default plus
// BU[u] for a known user and BI[i] for a known item. PredictRaw never
// panics on an index.
func (m *Model) PredictRaw(u, i int32) float32 {
	uk, ik := m.userKnown(u), m.itemKnown(i)
	users := m.hasUserTerms()
	if !uk || !ik {
		p := m.Default
		if uk && users && m.BU != nil {
			p += m.BU[u]
		}
		if ik && m.BI != nil {
			p += m.BI[i]
		}
		return p
	}
	var p float32
	if users {
		k := m.Dim
		p = userDot(m.U[int(u)*k:int(u)*k+k:int(u)*k+k], m.V[int(i)*k:int(i)*k+k:int(i)*k+k])
		if m.UserWeight != nil {
			p /= m.UserWeight[u] * m.ItemWeight[i]
		}
		if m.Offset != nil {
			p += m.Offset[u]
		}
	}
	if m.addsBias() {
		b := m.Mean
		if users && m.BU != nil {
			b += m.BU[u]
		}
		if m.BI != nil {
			b += m.BI[i]
		}
		p += b
	}
	return p
}

// Predict returns the prediction for user u and item i clamped to the
// rating scale, or for a Ranking model the raw score. Predict never
// panics on an index.
func (m *Model) Predict(u, i int32) float32 {
	if m.Ranking {
		return m.PredictRaw(u, i)
	}
	return m.Scale.Clamp(m.PredictRaw(u, i))
}

// PredictAll returns Predict for every rating of d, in order, written into
// dst (grown if too short). d must use the model's index space, as a test
// split of the training data does.
func (m *Model) PredictAll(d *ratings.Dataset, dst []float32) []float32 {
	n := min(len(d.Users), len(d.Items))
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for k := range dst {
		dst[k] = m.Predict(d.Users[k], d.Items[k])
	}
	return dst
}

// ScoreItems returns the raw score (PredictRaw) of every item for user u,
// written into dst (grown if too short), for ranking.
func (m *Model) ScoreItems(u int32, dst []float32) []float32 {
	if cap(dst) < m.NumItems {
		dst = make([]float32, m.NumItems)
	}
	dst = dst[:m.NumItems]
	if !m.userKnown(u) {
		for i := range dst {
			s := m.Default
			if m.BI != nil {
				s += m.BI[i]
			}
			dst[i] = s
		}
		return dst
	}
	users, bias := m.hasUserTerms(), m.addsBias()
	base := m.Mean
	k := m.Dim
	var pu []float32
	var uw, off float32
	if users {
		if m.BU != nil {
			base += m.BU[u]
		}
		pu = m.U[int(u)*k : int(u)*k+k : int(u)*k+k]
		if m.UserWeight != nil {
			uw = m.UserWeight[u]
		}
		if m.Offset != nil {
			off = m.Offset[u]
		}
	}
	// The terms of PredictRaw for a known user, with the user's share
	// looked up once (and m's fields read into locals, which writes to
	// dst could otherwise alias).
	v, iw, bi := m.V, m.ItemWeight, m.BI
	weighted, offset := m.UserWeight != nil, m.Offset != nil
	// A long, sparse user row (an EASE history) is gathered over its
	// nonzero entries: O(nonzeros) per item instead of O(Dim).
	nz, sparse := sparseUser(pu, nil)
	for i := range dst {
		var s float32
		if users {
			if sparse {
				s = gatherDot(pu, nz, v[i*k:i*k+k:i*k+k])
			} else {
				s = vec.Dot(pu, v[i*k:i*k+k:i*k+k])
			}
			if weighted {
				s /= uw * iw[i]
			}
			if offset {
				s += off
			}
		}
		if bias {
			b := base
			if bi != nil {
				b += bi[i]
			}
			s += b
		}
		dst[i] = s
	}
	return dst
}

// Affine maps every prediction p of m to a·p + b, with a > 0: how a model
// trained on ratings mapped affinely to another scale answers on the
// original one. It scales U (the interaction), Offset and the biases by a
// and maps Mean and Default; the ranking of items is unchanged. The
// caller sets Scale to the scale the predictions now live on.
func (m *Model) Affine(a, b float32) {
	for _, s := range [][]float32{m.U, m.Offset, m.BU, m.BI} {
		for k := range s {
			s[k] *= a
		}
	}
	m.Mean = a*m.Mean + b
	m.Default = a*m.Default + b
}
