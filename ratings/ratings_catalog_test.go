package ratings

import (
	"slices"
	"testing"
)

// TestWithCatalog: the catalog's unrated items join the index after the
// rated ones, in numeric ID order, with their titles; rated items keep
// their indices; splits keep the catalog's name.
func TestWithCatalog(t *testing.T) {
	d := &Dataset{Name: "d", Scale: Stars5, Users: []int32{0, 0}, Items: []int32{0, 1}, Values: []float32{4, 5},
		UserIDs: []string{"u"}, ItemIDs: []string{"7", "3"}}
	cat := map[string]string{"3": "Three (1990)", "7": "Seven (1995)", "10": "Ten (2001)", "9": "Nine (1999)"}
	c := d.WithCatalog(cat, "movies.dat")
	if want := []string{"7", "3", "9", "10"}; !slices.Equal(c.ItemIDs, want) {
		t.Fatalf("items %v, want %v", c.ItemIDs, want)
	}
	if want := []string{"Seven (1995)", "Three (1990)", "Nine (1999)", "Ten (2001)"}; !slices.Equal(c.ItemTitles, want) {
		t.Errorf("titles %v, want %v", c.ItemTitles, want)
	}
	if c.Catalog != "movies.dat" || d.Catalog != "" || len(d.ItemIDs) != 2 {
		t.Errorf("catalog %q, original %q with %d items", c.Catalog, d.Catalog, len(d.ItemIDs))
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := Holdout(c, 0.5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Train.Catalog != "movies.dat" || s.Train.NumItems() != 4 {
		t.Errorf("split: catalog %q, %d items", s.Train.Catalog, s.Train.NumItems())
	}
}
