package ratings

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Stats summarizes a dataset; Describe computes it.
type Stats struct {
	Name  string
	Scale Scale
	// Users and Items are the sizes of the index spaces; ActiveUsers and
	// ActiveItems count those with at least one rating.
	Users, Items             int
	ActiveUsers, ActiveItems int
	Ratings                  int
	// Density is Ratings / (Users · Items).
	Density float64
	// Mean and Std are the mean and standard deviation of the values.
	Mean, Std float64
	// PerUser and PerItem summarize the rating counts of active users and
	// items.
	PerUser, PerItem CountSummary
	// Hist counts the values: one bin per scale step when the scale has at
	// most 100 steps, else 10 equal-width bins over [Min, Max].
	Hist []Bin
}

// CountSummary summarizes a list of counts.
type CountSummary struct {
	Min, Median, Max int
	Mean             float64
}

// Bin is a histogram bin: the values v with Lo <= v < Hi (v <= Hi for the
// last bin), or v == Lo when Lo == Hi.
type Bin struct {
	Lo, Hi float32
	Count  int
}

// Describe computes the statistics of d in O(Len + NumUsers·log NumUsers +
// NumItems·log NumItems) time.
func Describe(d *Dataset) Stats {
	s := Stats{
		Name:    d.Name,
		Scale:   d.Scale,
		Users:   d.NumUsers(),
		Items:   d.NumItems(),
		Ratings: d.Len(),
		Density: d.Density(),
	}
	if s.Ratings > 0 {
		var sum, sq float64
		for _, v := range d.Values {
			sum += float64(v)
		}
		s.Mean = sum / float64(s.Ratings)
		for _, v := range d.Values {
			dv := float64(v) - s.Mean
			sq += dv * dv
		}
		s.Std = math.Sqrt(sq / float64(s.Ratings))
	}
	perUser, perItem := d.Counts()
	s.PerUser, s.ActiveUsers = summarize(perUser)
	s.PerItem, s.ActiveItems = summarize(perItem)
	s.Hist = histogram(d)
	return s
}

// summarize summarizes the non-zero counts, reordering count.
func summarize(count []int) (CountSummary, int) {
	active := count[:0] // in place: writes never pass reads
	for _, c := range count {
		if c > 0 {
			active = append(active, c)
		}
	}
	if len(active) == 0 {
		return CountSummary{}, 0
	}
	slices.Sort(active)
	total := 0
	for _, c := range active {
		total += c
	}
	n := len(active)
	med := active[n/2]
	if n%2 == 0 {
		med = (active[n/2-1] + active[n/2]) / 2
	}
	return CountSummary{
		Min:    active[0],
		Median: med,
		Max:    active[n-1],
		Mean:   float64(total) / float64(n),
	}, n
}

func histogram(d *Dataset) []Bin {
	sc := d.Scale
	if !(sc.Max > sc.Min) {
		return nil
	}
	var bins []Bin
	if sc.Step > 0 && float64(sc.Range()/sc.Step) <= 100 {
		steps := int(math.Floor(float64(sc.Range()/sc.Step)+1e-6)) + 1
		bins = make([]Bin, steps)
		for j := range bins {
			v := sc.Min + float32(j)*sc.Step
			bins[j] = Bin{Lo: v, Hi: v}
		}
		for _, v := range d.Values {
			j := int(math.Round(float64((v - sc.Min) / sc.Step)))
			bins[min(max(j, 0), steps-1)].Count++
		}
		return bins
	}
	const n = 10
	bins = make([]Bin, n)
	w := sc.Range() / n
	for j := range bins {
		bins[j] = Bin{Lo: sc.Min + float32(j)*w, Hi: sc.Min + float32(j+1)*w}
	}
	bins[n-1].Hi = sc.Max
	for _, v := range d.Values {
		j := int((v - sc.Min) / w)
		bins[min(max(j, 0), n-1)].Count++
	}
	return bins
}

// String prints the statistics as a compact table.
func (s Stats) String() string {
	var b strings.Builder
	name := s.Name
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(&b, "dataset   %s\n", name)
	fmt.Fprintf(&b, "scale     %v\n", s.Scale)
	fmt.Fprintf(&b, "users     %d (%d with ratings)\n", s.Users, s.ActiveUsers)
	fmt.Fprintf(&b, "items     %d (%d with ratings)\n", s.Items, s.ActiveItems)
	fmt.Fprintf(&b, "ratings   %d\n", s.Ratings)
	fmt.Fprintf(&b, "density   %.4f%%\n", 100*s.Density)
	fmt.Fprintf(&b, "mean      %.4f (sd %.4f)\n", s.Mean, s.Std)
	fmt.Fprintf(&b, "%-9s %8s %8s %8s %10s\n", "count", "min", "median", "max", "mean")
	for _, row := range []struct {
		name string
		c    CountSummary
	}{{"per user", s.PerUser}, {"per item", s.PerItem}} {
		fmt.Fprintf(&b, "%-9s %8d %8d %8d %10.2f\n", row.name, row.c.Min, row.c.Median, row.c.Max, row.c.Mean)
	}
	if len(s.Hist) > 0 {
		b.WriteString("values\n")
		for _, h := range s.Hist {
			label := fmt.Sprintf("%g", h.Lo)
			if h.Hi != h.Lo {
				label = fmt.Sprintf("[%g, %g)", h.Lo, h.Hi)
			}
			pct := 0.0
			if s.Ratings > 0 {
				pct = 100 * float64(h.Count) / float64(s.Ratings)
			}
			fmt.Fprintf(&b, "  %-14s %10d %6.2f%%\n", label, h.Count, pct)
		}
	}
	return b.String()
}
