package ratings

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Scale is the range of valid ratings. Step is the rating granularity (1
// for 1..5 stars, 0.5 for half stars); 0 means continuous.
//
// A rating scale is public: it sets the sensitivity of every differentially
// private mechanism, so it must come from what is known about the data
// (a format's published scale, or one the user declares), never from the
// ratings themselves. Inferred marks a scale that Load read off the data
// of a file whose format has none (the minimum and maximum rating seen):
// one stray rating can widen it, and it leaks that rating. Private methods
// refuse such a scale.
type Scale struct {
	Min, Max, Step float32
	// Inferred reports that the scale was read off the ratings rather than
	// declared.
	Inferred bool
}

// Contains reports whether r is a valid rating on the scale.
func (s Scale) Contains(r float32) bool {
	if !(r >= s.Min && r <= s.Max) { // also false for NaN
		return false
	}
	if s.Step > 0 {
		k := float64(r-s.Min) / float64(s.Step)
		return math.Abs(k-math.Round(k)) < 1e-4
	}
	return true
}

// Clamp returns r limited to [Min, Max].
func (s Scale) Clamp(r float32) float32 {
	if r < s.Min {
		return s.Min
	}
	if r > s.Max {
		return s.Max
	}
	return r
}

// Range returns Max − Min, the sensitivity of a single rating value.
func (s Scale) Range() float32 { return s.Max - s.Min }

// String formats the scale as "min..max step s", with "(inferred)" after
// an inferred scale.
func (s Scale) String() string {
	t := fmt.Sprintf("%g..%g", s.Min, s.Max)
	if s.Step > 0 {
		t += fmt.Sprintf(" step %g", s.Step)
	}
	if s.Inferred {
		t += " (inferred)"
	}
	return t
}

// Declared returns s without the Inferred mark: the scale as a user who
// knows it would declare it.
func (s Scale) Declared() Scale {
	s.Inferred = false
	return s
}

// Stars5 is the 1..5 integer-star scale of MovieLens 100K, 1M and Netflix.
var Stars5 = Scale{Min: 1, Max: 5, Step: 1}

// HalfStars5 is the 0.5..5 half-star scale of MovieLens 10M, 20M and latest.
var HalfStars5 = Scale{Min: 0.5, Max: 5, Step: 0.5}

// Dataset is a set of ratings over dense user and item indices.
//
// Rating k is (Users[k], Items[k], Values[k]). Users index UserIDs and Items
// index ItemIDs; both ID slices may hold indices that have no rating in this
// dataset (a test split shares its parent's index space). ItemTitles, when
// not nil, is parallel to ItemIDs. A Dataset is not modified after it is
// built; treat its slices as read-only.
type Dataset struct {
	Name       string
	Scale      Scale
	Users      []int32
	Items      []int32
	Values     []float32
	UserIDs    []string
	ItemIDs    []string
	ItemTitles []string
	// Side locates the side features of the users and items (keyed by ID,
	// shared by every split), or is nil; see SideSource.
	Side *SideSource
	// Catalog, when not empty, names the public item catalog ItemIDs
	// holds (the file listing the items, such as MovieLens's movie list):
	// every item of it is indexed, rated or not, so the item index does
	// not depend on the ratings (LoadOptions.Catalog, WithCatalog). Splits
	// keep it; filters that drop items clear it.
	Catalog string
}

// WithCatalog returns d with its item index extended by every item of the
// public catalog items (item ID → title) that d does not index yet, after
// d's own items in increasing ID order (numerically for numbers), with
// their titles, and Catalog set to source. The items already indexed keep
// their indices.
func (d *Dataset) WithCatalog(items map[string]string, source string) *Dataset {
	out := *d
	have := make(map[string]bool, len(d.ItemIDs))
	for _, id := range d.ItemIDs {
		have[id] = true
	}
	var extra []string
	for id := range items {
		if !have[id] {
			extra = append(extra, id)
		}
	}
	slices.SortFunc(extra, func(a, b string) int {
		if len(a) != len(b) && isDigits([]byte(a)) && isDigits([]byte(b)) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	n := len(d.ItemIDs)
	out.ItemIDs = append(d.ItemIDs[:n:n], extra...)
	titles := make([]string, n, n+len(extra))
	if d.ItemTitles != nil {
		copy(titles, d.ItemTitles)
	} else {
		for k, id := range d.ItemIDs {
			titles[k] = items[id]
		}
	}
	for _, id := range extra {
		titles = append(titles, items[id])
	}
	out.ItemTitles = titles
	out.Catalog = source
	return &out
}

// Public returns what of d a server may hold: the item index, titles,
// scale, side features and catalog name; no users and no ratings.
func (d *Dataset) Public() *Dataset {
	return &Dataset{Name: d.Name, Scale: d.Scale, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles, Side: d.Side, Catalog: d.Catalog}
}

// AnonymousItems returns a catalog of n items without IDs on scale sc,
// for a server that needs only the catalog's size and scale.
func AnonymousItems(n int, sc Scale) *Dataset {
	return &Dataset{Scale: sc, ItemIDs: make([]string, n)}
}

// Len returns the number of ratings.
func (d *Dataset) Len() int { return len(d.Values) }

// NumUsers returns the size of the user index space.
func (d *Dataset) NumUsers() int { return len(d.UserIDs) }

// NumItems returns the size of the item index space.
func (d *Dataset) NumItems() int { return len(d.ItemIDs) }

// Mean returns the mean rating, or the middle of the scale if d is empty.
func (d *Dataset) Mean() float64 {
	if len(d.Values) == 0 {
		return float64(d.Scale.Min+d.Scale.Max) / 2
	}
	var s float64
	for _, v := range d.Values {
		s += float64(v)
	}
	return s / float64(len(d.Values))
}

// Density returns Len / (NumUsers · NumItems).
func (d *Dataset) Density() float64 {
	n := float64(d.NumUsers()) * float64(d.NumItems())
	if n == 0 {
		return 0
	}
	return float64(d.Len()) / n
}

// Subset returns the ratings at the given positions, in that order, in the
// same index space as d.
func (d *Dataset) Subset(idx []int) *Dataset {
	s := d.empty(len(idx))
	for _, k := range idx {
		s.Users = append(s.Users, d.Users[k])
		s.Items = append(s.Items, d.Items[k])
		s.Values = append(s.Values, d.Values[k])
	}
	return s
}

// empty returns a dataset with d's metadata and room for n ratings.
func (d *Dataset) empty(n int) *Dataset {
	return &Dataset{
		Name:       d.Name,
		Scale:      d.Scale,
		Users:      make([]int32, 0, n),
		Items:      make([]int32, 0, n),
		Values:     make([]float32, 0, n),
		UserIDs:    d.UserIDs,
		ItemIDs:    d.ItemIDs,
		ItemTitles: d.ItemTitles,
		Side:       d.Side,
		Catalog:    d.Catalog,
	}
}

// Validate checks the internal consistency of d: parallel slices of equal
// length, indices in range, values on the scale, and no (user, item) pair
// rated twice (an error wrapping ErrDuplicate naming both positions and
// the IDs). Loaders and splits always produce valid datasets (a loader
// refuses a repeated pair with its file and line, or drops it under
// LoadOptions.SkipBad); Validate is for datasets built by hand.
func (d *Dataset) Validate() error {
	if len(d.Users) != len(d.Values) || len(d.Items) != len(d.Values) {
		return fmt.Errorf("ratings: dataset %q: Users, Items and Values have lengths %d, %d, %d", d.Name, len(d.Users), len(d.Items), len(d.Values))
	}
	if d.ItemTitles != nil && len(d.ItemTitles) != len(d.ItemIDs) {
		return fmt.Errorf("ratings: dataset %q: %d item titles for %d items", d.Name, len(d.ItemTitles), len(d.ItemIDs))
	}
	nu, ni := int32(len(d.UserIDs)), int32(len(d.ItemIDs))
	for k := range d.Values {
		if u := d.Users[k]; u < 0 || u >= nu {
			return fmt.Errorf("ratings: dataset %q: rating %d: user index %d out of range [0, %d)", d.Name, k, u, nu)
		}
		if i := d.Items[k]; i < 0 || i >= ni {
			return fmt.Errorf("ratings: dataset %q: rating %d: item index %d out of range [0, %d)", d.Name, k, i, ni)
		}
		if v := d.Values[k]; !d.Scale.Contains(v) {
			return fmt.Errorf("ratings: dataset %q: rating %d: value %g outside scale %v", d.Name, k, v, d.Scale)
		}
	}
	if dups := findDuplicates(d.Users, d.Items, int(nu), int(ni)); len(dups) > 0 {
		x := dups[0]
		return fmt.Errorf("ratings: dataset %q: ratings %d and %d are both user %q, item %q (%d repeated pairs in all): %w; "+
			"every sensitivity of the private methods assumes a user rates an item at most once, so keep one rating a pair "+
			"(LoadOptions.SkipBad keeps the first)", d.Name, x.first, x.later, d.UserIDs[d.Users[x.later]], d.ItemIDs[d.Items[x.later]],
			len(dups), ErrDuplicate)
	}
	return nil
}

// CSR is a compressed sparse row view of a dataset: row r (a user for
// ByUser, an item for ByItem) has columns Idx[Ptr[r]:Ptr[r+1]] with values
// Val[Ptr[r]:Ptr[r+1]] and positions Pos[Ptr[r]:Ptr[r+1]] in the dataset's
// flat slices. Columns within a row are in increasing order.
type CSR struct {
	Ptr []int
	Idx []int32
	Val []float32
	Pos []int32
}

// Rows returns the number of rows.
func (c *CSR) Rows() int { return len(c.Ptr) - 1 }

// Row returns the columns and values of row r.
func (c *CSR) Row(r int) (idx []int32, val []float32) {
	a, b := c.Ptr[r], c.Ptr[r+1]
	return c.Idx[a:b], c.Val[a:b]
}

// RowLen returns the number of entries in row r.
func (c *CSR) RowLen(r int) int { return c.Ptr[r+1] - c.Ptr[r] }

// ByUser returns the ratings grouped by user, items in increasing order.
// It costs O(Len) time and memory; callers that need it repeatedly keep it.
func (d *Dataset) ByUser() *CSR { return buildCSR(d.NumUsers(), d.Users, d.Items, d.Values) }

// ByItem returns the ratings grouped by item, users in increasing order.
func (d *Dataset) ByItem() *CSR { return buildCSR(d.NumItems(), d.Items, d.Users, d.Values) }

func buildCSR(rows int, row, col []int32, val []float32) *CSR {
	c := &CSR{
		Ptr: make([]int, rows+1),
		Idx: make([]int32, len(val)),
		Val: make([]float32, len(val)),
		Pos: make([]int32, len(val)),
	}
	for _, r := range row {
		c.Ptr[r+1]++
	}
	for r := 0; r < rows; r++ {
		c.Ptr[r+1] += c.Ptr[r]
	}
	next := make([]int, rows)
	copy(next, c.Ptr[:rows])
	for k, r := range row {
		p := next[r]
		next[r]++
		c.Idx[p] = col[k]
		c.Val[p] = val[k]
		c.Pos[p] = int32(k)
	}
	// Sort each row by column. Rows are usually short or already sorted;
	// long unsorted rows go to sort.Sort.
	for r := 0; r < rows; r++ {
		a, b := c.Ptr[r], c.Ptr[r+1]
		if b-a > 32 {
			if !sort.IsSorted(csrRow{c, a, b}) {
				sort.Sort(csrRow{c, a, b})
			}
			continue
		}
		for i := a + 1; i < b; i++ {
			for j := i; j > a && c.Idx[j] < c.Idx[j-1]; j-- {
				csrRow{c, a, b}.Swap(j-a, j-1-a)
			}
		}
	}
	return c
}

// csrRow sorts entries [a, b) of a CSR by column.
type csrRow struct {
	c    *CSR
	a, b int
}

func (r csrRow) Len() int           { return r.b - r.a }
func (r csrRow) Less(i, j int) bool { return r.c.Idx[r.a+i] < r.c.Idx[r.a+j] }
func (r csrRow) Swap(i, j int) {
	c, i, j := r.c, r.a+i, r.a+j
	c.Idx[i], c.Idx[j] = c.Idx[j], c.Idx[i]
	c.Val[i], c.Val[j] = c.Val[j], c.Val[i]
	c.Pos[i], c.Pos[j] = c.Pos[j], c.Pos[i]
}

// Counts returns the number of ratings of each user and of each item.
func (d *Dataset) Counts() (perUser, perItem []int) {
	perUser = make([]int, d.NumUsers())
	perItem = make([]int, d.NumItems())
	for k := range d.Values {
		perUser[d.Users[k]]++
		perItem[d.Items[k]]++
	}
	return perUser, perItem
}
