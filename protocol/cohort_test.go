package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// phasedServer broadcasts a setup round, train training rounds and a
// final round, and counts each round's uploads.
type phasedServer struct {
	train, round int
	uploads      []int
}

func (s *phasedServer) phase(r int) string {
	switch {
	case r == 0:
		return PhaseSetup
	case r == s.train+1:
		return PhaseFinal
	}
	return PhaseTrain
}

func (s *phasedServer) Broadcast(r int) (*Broadcast, error) {
	return &Broadcast{Round: r, Phase: s.phase(r), NumItems: 1}, nil
}

func (s *phasedServer) Aggregate(r int, ups []*Upload) error {
	n := 0
	for _, u := range ups {
		if u != nil {
			n++
		}
	}
	s.uploads = append(s.uploads, n)
	s.round++
	return nil
}

func (s *phasedServer) Done() bool { return s.round > s.train+1 }

// seenClient records every round it is asked, by phase: the inner
// client's own record, independent of Limited's.
type seenClient struct {
	id    int
	mu    sync.Mutex
	train []int
	other int
}

func (c *seenClient) ID() int { return c.id }

func (c *seenClient) Round(b *Broadcast, _ *rand.Rand) (*Upload, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.Phase == PhaseTrain {
		c.train = append(c.train, b.Round)
	} else {
		c.other++
	}
	return &Upload{Client: c.id, Round: b.Round, Items: []int32{0}}, nil
}

// TestCohortsLimitsHoldWhateverTheServerPicks runs a population under
// participation limits with honest and adversarial cohort choosers: a
// server asking every client every round, only the ineligible ones,
// duplicates and unknown IDs, or random subsets of any size. Whatever it
// picks, no client's data is read (its Round called) in more than
// MaxRounds training rounds, nor in two closer than MinGap, every client
// sees the setup and final rounds, and an honest server's round asks at
// most Cohort clients.
func TestCohortsLimitsHoldWhateverTheServerPicks(t *testing.T) {
	const n, train = 40, 30
	all := func(_ int, _ []int, _ int) []int {
		out := make([]int, n+5) // every client and five unknown IDs
		for k := range out {
			out[k] = k
		}
		return out
	}
	ineligible := func(_ int, eligible []int, _ int) []int {
		var out []int
		for k := range n {
			if !slices.Contains(eligible, k) {
				out = append(out, k, k) // twice
			}
		}
		return out
	}
	random := func(round int, _ []int, _ int) []int {
		r := rand.New(rand.NewPCG(uint64(round), 9))
		var out []int
		for range r.IntN(2 * n) {
			out = append(out, r.IntN(n+3)-1)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		p      Participation
		choose CohortChooser
		honest bool
		none   bool // no client may answer any training round
	}{
		{"honest, k=2 b=5", Participation{Cohort: 8, MaxRounds: 2, MinGap: 5}, nil, true, false},
		{"honest, k=1", Participation{Cohort: 10, MaxRounds: 1}, nil, true, false},
		{"honest, gap only", Participation{Cohort: 10, MinGap: 4}, nil, true, false},
		{"everyone every round, k=3 b=4", Participation{Cohort: 8, MaxRounds: 3, MinGap: 4}, all, false, false},
		{"everyone every round, k=2", Participation{Cohort: 8, MaxRounds: 2}, all, false, false},
		{"only the ineligible, k=2 b=3", Participation{Cohort: 8, MaxRounds: 2, MinGap: 3}, ineligible, false, true},
		{"random, k=4 b=2", Participation{Cohort: 8, MaxRounds: 4, MinGap: 2}, random, false, false},
		{"random, no cohort size", Participation{MaxRounds: 3, MinGap: 6}, random, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &phasedServer{train: train}
			cl := make([]*seenClient, n)
			list := make([]Client, n)
			for k := range cl {
				cl[k] = &seenClient{id: k}
				list[k] = cl[k]
			}
			err := Run(context.Background(), srv, list, RunOptions{Seed: 3, Participation: c.p, Choose: c.choose})
			if err != nil {
				t.Fatal(err)
			}
			answered := 0
			for _, x := range cl {
				answered += len(x.train)
				if c.p.MaxRounds > 0 && len(x.train) > c.p.MaxRounds {
					t.Errorf("client %d answered %d training rounds %v, limit %d", x.id, len(x.train), x.train, c.p.MaxRounds)
				}
				for i := 1; i < len(x.train); i++ {
					if d := x.train[i] - x.train[i-1]; d < max(c.p.MinGap, 1) {
						t.Errorf("client %d answered rounds %v: a gap of %d, want ≥ %d", x.id, x.train, d, c.p.MinGap)
					}
				}
				if x.other != 2 {
					t.Errorf("client %d saw %d setup and final rounds, want 2", x.id, x.other)
				}
			}
			if (answered == 0) != c.none {
				t.Fatalf("%d training rounds answered in all, want none: %v", answered, c.none)
			}
			for r, u := range srv.uploads {
				if c.honest && srv.phase(r) == PhaseTrain && u > c.p.Cohort {
					t.Errorf("round %d: %d uploads from a cohort of %d", r, u, c.p.Cohort)
				}
			}
		})
	}
}

// TestSeededCohortIsUniformAndReproducible: the honest chooser picks size
// distinct eligible clients, the same for the same seed and round, and
// every eligible client about as often.
func TestSeededCohortIsUniformAndReproducible(t *testing.T) {
	eligible := []int{2, 3, 5, 7, 11, 13, 17, 19, 23, 29}
	ch := SeededCohort(5)
	hits := map[int]int{}
	const rounds = 2000
	for r := range rounds {
		got := ch(r, eligible, 3)
		if len(got) != 3 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 3 {
			t.Fatalf("round %d: cohort %v", r, got)
		}
		for _, id := range got {
			if !slices.Contains(eligible, id) {
				t.Fatalf("round %d: %d is not eligible", r, id)
			}
			hits[id]++
		}
		if again := ch(r, eligible, 3); !slices.Equal(got, again) {
			t.Fatalf("round %d: %v then %v", r, got, again)
		}
	}
	for _, id := range eligible {
		// Expected 600 hits, sd ≈ 20.5: six sd either side.
		if h := hits[id]; h < 477 || h > 723 {
			t.Errorf("client %d picked %d times in %d rounds, want about 600", id, h, rounds)
		}
	}
	if got := ch(0, eligible, 0); !slices.Equal(got, eligible) {
		t.Errorf("size 0: %v, want every eligible client", got)
	}
}
