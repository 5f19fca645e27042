package ratings

// MinCounts keeps the largest subset of ratings in which every user has at
// least minPerUser ratings and every item at least minPerItem (the
// (minPerUser, minPerItem)-core): it drops the ratings of users and items
// below their minimum and repeats until nothing changes, since dropping an
// item can push a user below the minimum and vice versa.
//
// The result is re-indexed densely: users and items without ratings are
// removed from UserIDs, ItemIDs and ItemTitles, the others keep their
// relative order, and the ratings keep theirs. A minimum below 1 counts as
// 1, so MinCounts(d, 0, 0) is Compact(d). The result may be empty.
func MinCounts(d *Dataset, minPerUser, minPerItem int) *Dataset {
	minU, minI := max(1, minPerUser), max(1, minPerItem)
	perUser, perItem := d.Counts()
	keep := make([]bool, d.Len())
	for k := range keep {
		keep[k] = true
	}
	// Each pass drops every kept rating whose user or item is currently
	// below its minimum, updating counts as it goes. The core is the
	// greatest fixed point of this removal, so the order does not matter.
	for changed := true; changed; {
		changed = false
		for k, ok := range keep {
			if !ok {
				continue
			}
			u, i := d.Users[k], d.Items[k]
			if perUser[u] < minU || perItem[i] < minI {
				keep[k] = false
				perUser[u]--
				perItem[i]--
				changed = true
			}
		}
	}

	userMap, userIDs := reindex(perUser, minU, d.UserIDs)
	itemMap, itemIDs := reindex(perItem, minI, d.ItemIDs)
	var titles []string
	if d.ItemTitles != nil {
		titles = make([]string, 0, len(itemIDs))
		for i, t := range d.ItemTitles {
			if itemMap[i] >= 0 {
				titles = append(titles, t)
			}
		}
	}
	n := 0
	for _, ok := range keep {
		if ok {
			n++
		}
	}
	out := &Dataset{
		Name:       d.Name,
		Scale:      d.Scale,
		Users:      make([]int32, 0, n),
		Items:      make([]int32, 0, n),
		Values:     make([]float32, 0, n),
		UserIDs:    userIDs,
		ItemIDs:    itemIDs,
		ItemTitles: titles,
		Side:       d.Side,
	}
	for k, ok := range keep {
		if ok {
			out.Users = append(out.Users, userMap[d.Users[k]])
			out.Items = append(out.Items, itemMap[d.Items[k]])
			out.Values = append(out.Values, d.Values[k])
		}
	}
	return out
}

// Compact re-indexes d densely, dropping users and items without ratings,
// for example after a split or a partition. It is MinCounts(d, 1, 1).
func Compact(d *Dataset) *Dataset { return MinCounts(d, 1, 1) }

// reindex maps the indices whose count reaches minCount to 0, 1, ... in
// order, the others to -1, and returns the map with the surviving IDs.
func reindex(count []int, minCount int, ids []string) ([]int32, []string) {
	m := make([]int32, len(count))
	next := int32(0)
	for j, c := range count {
		if c >= minCount {
			m[j] = next
			next++
		} else {
			m[j] = -1
		}
	}
	kept := make([]string, 0, next)
	for j, id := range ids {
		if m[j] >= 0 {
			kept = append(kept, id)
		}
	}
	return m, kept
}
