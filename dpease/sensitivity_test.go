package dpease

import (
	"math"
	"testing"

	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/rng"
)

// synth returns a random implicit dataset of nu users and ni items.
func synth(nu, ni int, seed uint64) *ratings.Dataset {
	g := rng.New(seed, 1)
	d := &ratings.Dataset{Name: "synth", Scale: ratings.Scale{Min: 1, Max: 5}}
	for u := range nu {
		d.UserIDs = append(d.UserIDs, string(rune('a'+u%26))+string(rune('0'+u/26)))
	}
	for j := range ni {
		d.ItemIDs = append(d.ItemIDs, string(rune('A'+j%26))+string(rune('0'+j/26)))
	}
	for u := range nu {
		n := 1 + g.IntN(ni/2)
		for _, j := range g.Perm(ni)[:n] {
			d.Users, d.Items, d.Values = append(d.Users, int32(u)), append(d.Items, int32(j)), append(d.Values, 4)
		}
	}
	return d
}

// withCanary returns d re-indexed with one more (empty) user, and d with
// that user rating items.
func withCanary(d *ratings.Dataset, items []int) (without, with *ratings.Dataset) {
	ids := append(append([]string(nil), d.UserIDs...), "canary")
	without = &ratings.Dataset{Name: d.Name, Scale: d.Scale, Users: d.Users, Items: d.Items, Values: d.Values, UserIDs: ids, ItemIDs: d.ItemIDs}
	with = &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: ids, ItemIDs: d.ItemIDs,
		Users: append([]int32(nil), d.Users...), Items: append([]int32(nil), d.Items...), Values: append([]float32(nil), d.Values...)}
	for _, j := range items {
		with.Users, with.Items, with.Values = append(with.Users, int32(len(ids)-1)), append(with.Items, int32(j)), append(with.Values, 5)
	}
	return without, with
}

// round runs one round of srv with the clients directly (the sum is what
// secure aggregation hands the server).
func round(t *testing.T, srv *Server, cl *Clients, r int, b *protocol.Broadcast) {
	t.Helper()
	ups := make([]*protocol.Upload, len(cl.List))
	for k, c := range cl.List {
		up, err := c.Round(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		ups[k] = up
	}
	if err := srv.Aggregate(r, ups); err != nil {
		t.Fatal(err)
	}
}

func l2diff(a, b []float64) float64 {
	var s float64
	for k := range a {
		s += (a[k] - b[k]) * (a[k] - b[k])
	}
	return math.Sqrt(s)
}

// TestSensitivity adds one user to a dataset and runs both releases on the
// two neighbours with the same noise (seeded test mode, the second round
// on the first neighbour's public top items, as adaptive composition
// conditions on the earlier release): each release moves by at most the
// L2 sensitivity the ledger charges, for canaries of every size.
func TestSensitivity(t *testing.T) {
	const ni = 40
	d := synth(30, ni, 3)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Seeded = 15, 4, true
	canaries := map[string][]int{"one item": {0}, "cap items": {1, 2, 3, 4}, "every item": nil, "tail only": {38, 39}}
	for j := range ni {
		canaries["every item"] = append(canaries["every item"], j)
	}
	for name, items := range canaries {
		without, with := withCanary(d, items)
		s0, err := NewServer(cfg, ratings.AnonymousItems(ni, ratings.Scale{}), 9)
		if err != nil {
			t.Fatal(err)
		}
		s1, _ := NewServer(cfg, ratings.AnonymousItems(ni, ratings.Scale{}), 9)
		c0, c1 := mustClients(t, without, cfg), mustClients(t, with, cfg)
		b, _ := s0.Broadcast(0)
		round(t, s0, c0, 0, b)
		round(t, s1, c1, 0, b)
		if got := l2diff(s0.st.Counts, s1.st.Counts); got > 1+1e-6 {
			t.Errorf("%s: counts moved by %.4f > sensitivity 1", name, got)
		} else if got == 0 {
			t.Errorf("%s: counts did not move: the canary is not in the release", name)
		}
		s1.st.Top = s0.st.Top // both neighbours release on the same public top items
		b, _ = s0.Broadcast(1)
		round(t, s0, c0, 1, b)
		round(t, s1, c1, 1, b)
		lim := GramL2(cfg.Cap)
		got := l2diff(s0.gram, s1.gram)
		if got > lim+1e-6 {
			t.Errorf("%s: Gram moved by %.4f > charged sensitivity %.4f", name, got, lim)
		}
		t.Logf("%s: Gram moved by %.4f (charged %.4f)", name, got, lim)
		for _, r := range s0.Ledger().Releases() {
			if r.Name == "" || !(r.Rho > 0) {
				t.Errorf("release %+v not charged", r)
			}
		}
		if n := len(s0.Ledger().Releases()); n != 2 {
			t.Errorf("%d releases in the ledger, want 2", n)
		}
	}
}

// TestSensitivityNegativeControl: the canary's own uploads meet the bound
// only with the weights of the protocol; unscaled indicators (weight 1)
// or a cap of 1 against a ledger charging cap 4 break it, so the checks
// above can fail.
func TestSensitivityNegativeControl(t *testing.T) {
	top := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	norm := func(u *protocol.Upload) float64 {
		var s float64
		for _, v := range u.Values {
			s += float64(v) * float64(v)
		}
		return math.Sqrt(s)
	}
	for n := 1; n <= len(top); n++ {
		if got := norm(GramUpload(0, top[:n], top, 4)); got > GramL2(4)+1e-6 {
			t.Errorf("n = %d: upload norm %.4f > %.4f", n, got, GramL2(4))
		}
	}
	if got := norm(GramUpload(0, top[:1], top, 1)); !(got > GramL2(4)) {
		t.Errorf("negative control: cap 1 upload of one item has norm %.4f, want > %.4f", got, GramL2(4))
	}
	// End to end: a canary device with cap 1 (weight 1 on its one item)
	// moves the released Gram by more than the ledger charges for cap 4.
	d := synth(30, 40, 3)
	cfg := DefaultConfig()
	cfg.TopItems, cfg.Cap, cfg.Seeded = 15, 4, true
	s0, _ := NewServer(cfg, ratings.AnonymousItems(40, ratings.Scale{}), 9)
	s1, _ := NewServer(cfg, ratings.AnonymousItems(40, ratings.Scale{}), 9)
	without, with := withCanary(d, nil)
	c0, c1 := mustClients(t, without, cfg), mustClients(t, with, cfg)
	b, _ := s0.Broadcast(0)
	round(t, s0, c0, 0, b)
	round(t, s1, c1, 0, b)
	s1.st.Top = s0.st.Top
	cap1 := cfg
	cap1.Cap = 1
	c1.List = append(c1.List, &client{id: len(with.UserIDs) - 1, items: []int32{s0.st.Top[0]}, cfg: &cap1, pub: c1.pub})
	b, _ = s0.Broadcast(1)
	round(t, s0, c0, 1, b)
	round(t, s1, c1, 1, b)
	if got := l2diff(s0.gram, s1.gram); !(got > GramL2(cfg.Cap)) {
		t.Errorf("negative control: a cap-1 canary moved the Gram by %.4f, want > %.4f", got, GramL2(cfg.Cap))
	}
}
