package ratings

import (
	"fmt"
	"sort"
)

// maxSmallID bounds the direct lookup table for integer IDs: canonical
// decimal IDs below it are indexed through a slice instead of a map.
const maxSmallID = 1 << 22

// idMap assigns dense indices to ID strings in order of first appearance.
// Canonical decimal IDs ("0", "17", not "017") below maxSmallID go through a
// slice; other IDs through a map. A canonical decimal has a single spelling,
// so the two never disagree.
type idMap struct {
	small []int32 // small[n] = index+1 of ID n, 0 if absent
	m     map[string]int32
	ids   []string
}

// smallID returns the value of b if it is a canonical decimal below
// maxSmallID.
func smallID(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 7 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < maxSmallID
}

// find returns the index of ID b, or -1.
func (m *idMap) find(b []byte) int32 {
	if n, ok := smallID(b); ok {
		if n < len(m.small) {
			return m.small[n] - 1
		}
		return -1
	}
	if i, ok := m.m[string(b)]; ok {
		return i
	}
	return -1
}

// index returns the index of ID b, adding it if new.
func (m *idMap) index(b []byte) int32 {
	if n, ok := smallID(b); ok {
		if n < len(m.small) {
			if i := m.small[n]; i != 0 {
				return i - 1
			}
		} else {
			size := max(2*len(m.small), n+1, 1024)
			size = min(size, maxSmallID)
			s := make([]int32, size)
			copy(s, m.small)
			m.small = s
		}
		i := int32(len(m.ids))
		m.ids = append(m.ids, string(b))
		m.small[n] = i + 1
		return i
	}
	if i, ok := m.m[string(b)]; ok {
		return i
	}
	if m.m == nil {
		m.m = make(map[string]int32)
	}
	i := int32(len(m.ids))
	s := string(b)
	m.ids = append(m.ids, s)
	m.m[s] = i
	return i
}

// Builder assigns dense indices to original IDs in order of first appearance
// and collects ratings in the order they are added. The zero Builder is not
// usable; call NewBuilder.
type Builder struct {
	name   string
	scale  Scale
	users  idMap
	items  idMap
	us, is []int32
	vs     []float32
	pairs  map[uint64]struct{} // (user, item) pairs added through Add
}

// NewBuilder returns an empty Builder for a dataset with the given name and
// scale.
func NewBuilder(name string, scale Scale) *Builder {
	return &Builder{name: name, scale: scale}
}

// Add adds the rating of item by user. It returns an error wrapping ErrRange
// if value is not on the scale, or ErrDuplicate if the (user, item) pair was
// added before; the rating is not added then.
func (b *Builder) Add(user, item string, value float32) error {
	if !b.scale.Contains(value) {
		return fmt.Errorf("ratings: user %q, item %q: rating %g outside scale %v: %w", user, item, value, b.scale, ErrRange)
	}
	if b.pairs == nil {
		b.pairs = make(map[uint64]struct{})
	}
	u, i := b.users.index([]byte(user)), b.items.index([]byte(item))
	key := uint64(uint32(u))<<32 | uint64(uint32(i))
	if _, dup := b.pairs[key]; dup {
		return fmt.Errorf("ratings: user %q, item %q: %w", user, item, ErrDuplicate)
	}
	b.pairs[key] = struct{}{}
	b.add(u, i, value)
	return nil
}

// add appends a rating without checks.
func (b *Builder) add(u, i int32, v float32) {
	b.us = append(b.us, u)
	b.is = append(b.is, i)
	b.vs = append(b.vs, v)
}

// Dataset returns the dataset built so far. The Builder stays usable: later
// additions do not change the returned dataset.
func (b *Builder) Dataset() *Dataset {
	n := len(b.vs)
	nu, ni := len(b.users.ids), len(b.items.ids)
	return &Dataset{
		Name:    b.name,
		Scale:   b.scale,
		Users:   b.us[:n:n],
		Items:   b.is[:n:n],
		Values:  b.vs[:n:n],
		UserIDs: b.users.ids[:nu:nu],
		ItemIDs: b.items.ids[:ni:ni],
	}
}

// duplicate is a repeated (user, item) pair: the rating at position later
// repeats the one at position first.
type duplicate struct{ first, later int32 }

// findDuplicates returns the repeated (user, item) pairs among the ratings,
// ordered by the position of the repetition. It runs in O(len + nu + ni)
// time: a stable counting sort by user, then a scan of each user's items
// against a stamp array.
func findDuplicates(users, items []int32, nu, ni int) []duplicate {
	if len(users) < 2 {
		return nil
	}
	start := make([]int32, nu+1)
	for _, u := range users {
		start[u+1]++
	}
	for u := 0; u < nu; u++ {
		start[u+1] += start[u]
	}
	order := make([]int32, len(users))
	next := make([]int32, nu)
	copy(next, start[:nu])
	for k, u := range users {
		order[next[u]] = int32(k)
		next[u]++
	}
	stamp := make([]int32, ni) // user+1 that last rated the item
	first := make([]int32, ni) // position of that rating
	var dups []duplicate
	for u := 0; u < nu; u++ {
		for _, k := range order[start[u]:start[u+1]] {
			i := items[k]
			if stamp[i] == int32(u+1) {
				dups = append(dups, duplicate{first: first[i], later: k})
				continue
			}
			stamp[i] = int32(u + 1)
			first[i] = k
		}
	}
	sort.Slice(dups, func(a, b int) bool { return dups[a].later < dups[b].later })
	return dups
}
