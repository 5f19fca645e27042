package ratings

import "github.com/privrec/privrec/rng"

// PartitionUsers splits d horizontally among n vendors, as in the
// multi-vendor setting (de With & Erkin, §3.3): each user is assigned to one
// of the n vendors independently and uniformly at random, and vendor v gets
// all the ratings of its users. The parts share d's index space, keep d's
// order, and every rating is in exactly one part. A vendor may receive no
// user when users are few. n must lie in [1, NumUsers].
func PartitionUsers(d *Dataset, n int, seed uint64) ([]*Dataset, error) {
	if n < 1 || n > d.NumUsers() {
		return nil, badParam("partition users: %d vendors, want 1 <= n <= %d (the number of users)", n, d.NumUsers())
	}
	owner := assign(d.NumUsers(), n, seed, streamPartitionUsers)
	return partition(d, d.Users, owner, n), nil
}

// PartitionItems splits d vertically among n vendors: each item is assigned
// to one of the n vendors independently and uniformly at random, and vendor
// v gets all the ratings of its items. The parts share d's index space, keep
// d's order, and every rating is in exactly one part. n must lie in
// [1, NumItems].
func PartitionItems(d *Dataset, n int, seed uint64) ([]*Dataset, error) {
	if n < 1 || n > d.NumItems() {
		return nil, badParam("partition items: %d vendors, want 1 <= n <= %d (the number of items)", n, d.NumItems())
	}
	owner := assign(d.NumItems(), n, seed, streamPartitionItems)
	return partition(d, d.Items, owner, n), nil
}

// assign draws a vendor in [0, n) for each of m rows.
func assign(m, n int, seed, stream uint64) []int32 {
	r := rng.New(seed, stream)
	owner := make([]int32, m)
	for j := range owner {
		owner[j] = int32(r.IntN(n))
	}
	return owner
}

// partition gives rating k to part owner[row[k]].
func partition(d *Dataset, row []int32, owner []int32, n int) []*Dataset {
	size := make([]int, n)
	for _, x := range row {
		size[owner[x]]++
	}
	idx := make([][]int, n)
	for v := range idx {
		idx[v] = make([]int, 0, size[v])
	}
	for k, x := range row {
		v := owner[x]
		idx[v] = append(idx[v], k)
	}
	parts := make([]*Dataset, n)
	for v := range parts {
		parts[v] = d.Subset(idx[v])
	}
	return parts
}
