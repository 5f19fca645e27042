package protocol_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/privrec/privrec/protocol"
)

// countServer learns how many clients rated each item.
type countServer struct {
	counts []int32
	done   bool
}

func (s *countServer) Broadcast(round int) (*protocol.Broadcast, error) {
	return &protocol.Broadcast{Round: round, Phase: protocol.PhaseSetup, NumItems: len(s.counts)}, nil
}

func (s *countServer) Aggregate(round int, ups []*protocol.Upload) error {
	for _, u := range ups { // client order, whatever the arrival order
		for k, i := range u.Items {
			s.counts[i] += u.Counts[k]
		}
	}
	s.done = true
	return nil
}

func (s *countServer) Done() bool { return s.done }

// device holds one user's rated items.
type device struct {
	id    int
	items []int32
}

func (d *device) ID() int { return d.id }

func (d *device) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	ones := make([]int32, len(d.items))
	for k := range ones {
		ones[k] = 1
	}
	return &protocol.Upload{Client: d.id, Round: b.Round, Items: d.items, Counts: ones}, nil
}

func Example() {
	srv := &countServer{counts: make([]int32, 3)}
	clients := []protocol.Client{
		&device{id: 0, items: []int32{0, 2}},
		&device{id: 1, items: []int32{2}},
	}
	if err := protocol.Run(context.Background(), srv, clients, protocol.RunOptions{Workers: 2, Seed: 1}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(srv.counts)
	// Output: [1 0 2]
}
