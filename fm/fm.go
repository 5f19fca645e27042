package fm

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/privrec/privrec/ratings"
)

// ErrConfig is wrapped by every error about an invalid Config.
var ErrConfig = errors.New("fm: invalid config")

// ErrDiverged is wrapped by the error of a run whose parameters blew up.
var ErrDiverged = errors.New("fm: training diverged")

// ErrSide is wrapped by every error about missing or malformed side
// features: a dataset without the side files Features asks for.
var ErrSide = errors.New("fm: side features unavailable")

// Features chooses the features of a rating.
type Features string

const (
	// IDs uses the user and item indicators only: biased MF.
	IDs Features = "ids"
	// Items adds the item's public attributes: its genres (weights summing
	// to 1) and its release-year bucket.
	Items Features = "items"
	// All adds, besides Items, the user's attributes: gender, age bucket
	// and occupation.
	All Features = "all"
)

// Feat is one active feature of a rating: its index and value x_f.
type Feat struct {
	Index int32
	Value float32
}

// Encoding is the feature space of a dataset: the user indicators, then
// the item indicators, then the item attributes, then the user
// attributes. Every rating (u, i) has the features u, NumUsers+i, the
// item's attributes ItemAttrs[i] and the user's UserAttrs[u].
type Encoding struct {
	Features           Features
	NumUsers, NumItems int
	// NumItemAttrs and NumUserAttrs count the attribute features; Names
	// names them (item attributes first), e.g. "genre=Drama",
	// "year=1990", "gender=F", "age=25-34", "occupation=7".
	NumItemAttrs, NumUserAttrs int
	Names                      []string
	// ItemAttrs holds each item's attribute features, indexed by the item
	// and with Index counted from the first item attribute (0 ..
	// NumItemAttrs-1); nil under IDs.
	ItemAttrs [][]Feat
	// UserAttrs holds each user's attribute features (Index from 0 ..
	// NumUserAttrs-1); nil unless All.
	UserAttrs [][]Feat
	// MissingItems and MissingUsers count the indices the side files do not
	// list: they have no attribute features.
	MissingItems, MissingUsers int
}

// NumFeatures returns the size of the feature space.
func (e *Encoding) NumFeatures() int {
	return e.NumUsers + e.NumItems + e.NumItemAttrs + e.NumUserAttrs
}

// itemAttrBase and userAttrBase are the offsets of the attribute blocks.
func (e *Encoding) itemAttrBase() int32 { return int32(e.NumUsers + e.NumItems) }
func (e *Encoding) userAttrBase() int32 { return int32(e.NumUsers + e.NumItems + e.NumItemAttrs) }

// ageBuckets are the ML-1M age brackets; ML-100K's ages in years fall into
// the same brackets.
var ageBuckets = []struct {
	lo   int
	name string
}{{0, "<18"}, {18, "18-24"}, {25, "25-34"}, {35, "35-44"}, {45, "45-49"}, {50, "50-55"}, {56, "56+"}}

func ageBucket(age int) int {
	b := 0
	for k, a := range ageBuckets {
		if age >= a.lo {
			b = k
		}
	}
	return b
}

// Encode returns the feature space of d for f, with release years grouped
// in buckets of yearBucket years. Items needs the item side file of d
// (u.item, movies.dat, movies.csv), All also the user file (u.user,
// users.dat); a dataset without them, or with a malformed one, is an
// error wrapping ErrSide that names the files — never a silent fall back
// to IDs.
func Encode(d *ratings.Dataset, f Features, yearBucket int) (*Encoding, error) {
	e := &Encoding{Features: f, NumUsers: d.NumUsers(), NumItems: d.NumItems()}
	switch f {
	case IDs:
		return e, nil
	case Items, All:
	default:
		return nil, fmt.Errorf("%w: features %q, want ids, items or all", ErrConfig, f)
	}
	if yearBucket < 1 {
		return nil, fmt.Errorf("%w: year bucket %d must be ≥ 1", ErrConfig, yearBucket)
	}
	if d.Side == nil {
		return nil, fmt.Errorf("%w: dataset %q has no side files (features %s needs u.item, movies.dat or movies.csv beside the ratings)", ErrSide, d.Name, f)
	}
	side, err := d.Side.Features()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSide, err)
	}
	if side.Items == nil {
		return nil, fmt.Errorf("%w: dataset %q has no item file (looked for %s)", ErrSide, d.Name, strings.Join(d.Side.Want, ", "))
	}
	if f == All && side.Users == nil {
		return nil, fmt.Errorf("%w: features all needs user attributes; dataset %q has no user file (looked for %s)", ErrSide, d.Name, strings.Join(d.Side.Want, ", "))
	}
	names := map[string]int32{}
	intern := func(name string) int32 {
		k, ok := names[name]
		if !ok {
			k = int32(len(e.Names))
			names[name] = k
			e.Names = append(e.Names, name)
		}
		return k
	}
	// Genres first, in vocabulary order, then year buckets as seen.
	for _, g := range side.Genres {
		intern("genre=" + g)
	}
	e.ItemAttrs = make([][]Feat, e.NumItems)
	for i, id := range d.ItemIDs {
		it, ok := side.Items[id]
		if !ok {
			e.MissingItems++
			continue
		}
		var fs []Feat
		for _, g := range it.Genres {
			fs = append(fs, Feat{intern("genre=" + side.Genres[g]), 1 / float32(len(it.Genres))})
		}
		if it.Year > 0 {
			fs = append(fs, Feat{intern(fmt.Sprintf("year=%d", it.Year/yearBucket*yearBucket)), 1})
		}
		e.ItemAttrs[i] = fs
	}
	e.NumItemAttrs = len(e.Names)
	if f == All {
		e.UserAttrs = make([][]Feat, e.NumUsers)
		for u, id := range d.UserIDs {
			us, ok := side.Users[id]
			if !ok {
				e.MissingUsers++
				continue
			}
			e.UserAttrs[u] = []Feat{
				{intern("gender=" + us.Gender), 1},
				{intern("age=" + ageBuckets[ageBucket(us.Age)].name), 1},
				{intern("occupation=" + us.Occupation), 1},
			}
		}
		for k := range e.UserAttrs {
			for j := range e.UserAttrs[k] {
				e.UserAttrs[k][j].Index -= int32(e.NumItemAttrs)
			}
		}
		e.NumUserAttrs = len(e.Names) - e.NumItemAttrs
	}
	return e, nil
}

// appendFeatures appends the active features of rating (u, i) in the
// global index space: the user's side first (nUser of them), then the
// item's.
func (e *Encoding) appendFeatures(dst []Feat, u, i int32) (fs []Feat, nUser int) {
	dst = append(dst, Feat{u, 1})
	if e.UserAttrs != nil {
		for _, f := range e.UserAttrs[u] {
			dst = append(dst, Feat{e.userAttrBase() + f.Index, f.Value})
		}
	}
	nUser = len(dst)
	dst = append(dst, Feat{int32(e.NumUsers) + i, 1})
	if e.ItemAttrs != nil {
		for _, f := range e.ItemAttrs[i] {
			dst = append(dst, Feat{e.itemAttrBase() + f.Index, f.Value})
		}
	}
	return dst, nUser
}

// Params are the parameters of a second-order FM over NumFeatures
// features: ŷ(x) = W0 + Σ_f W[f] x_f + Σ_{f<g} <V_f, V_g> x_f x_g.
type Params struct {
	Dim int
	W0  float32
	W   []float32 // per-feature biases
	V   []float32 // per-feature factors, row-major NumFeatures×Dim
}

// row returns the factors of feature f.
func (p *Params) row(f int32) []float32 {
	return p.V[int(f)*p.Dim : (int(f)+1)*p.Dim : (int(f)+1)*p.Dim]
}

// Predict returns ŷ(x) for the active features fs in O(k·n) by Rendle's
// identity Σ_{f<g} <v_f, v_g> x_f x_g = ½ Σ_d [(Σ_f v_fd x_f)² − Σ_f
// v_fd² x_f²]; sum (length Dim) receives Σ_f v_f x_f.
func (p *Params) Predict(fs []Feat, sum []float32) float32 { return p.interact(p.W0, fs, sum) }

// half returns Σ_f x_f v_f over fs (into sum) and the bias part of the
// features: Σ_f w_f x_f plus their own pairwise interactions.
func (p *Params) half(fs []Feat, sum []float32) float32 { return p.interact(0, fs, sum) }

// interact returns y0 + Σ_f w_f x_f + Σ_{f<g} <v_f, v_g> x_f x_g over fs by
// Rendle's identity, and Σ_f v_f x_f in sum.
func (p *Params) interact(y0 float32, fs []Feat, sum []float32) float32 {
	clear(sum)
	y := y0
	var sq float32
	for _, f := range fs {
		y += p.W[f.Index] * f.Value
		for d, v := range p.row(f.Index) {
			xv := v * f.Value
			sum[d] += xv
			sq += xv * xv
		}
	}
	var pair float32
	for _, s := range sum {
		pair += s * s
	}
	return y + 0.5*(pair-sq)
}

// finite reports whether every parameter is finite and below bound.
func (p *Params) finite(bound float64) bool {
	ok := func(x float32) bool { return math.Abs(float64(x)) <= bound }
	if !ok(p.W0) {
		return false
	}
	for _, x := range p.W {
		if !ok(x) {
			return false
		}
	}
	for _, x := range p.V {
		if !ok(x) {
			return false
		}
	}
	return true
}
