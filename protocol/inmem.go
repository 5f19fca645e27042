package protocol

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/privrec/privrec/rng"
)

// ErrClient is wrapped by errors a client returns during a round.
var ErrClient = errors.New("protocol: client failed")

// InMem is an in-process Transport: Exchange runs every client's Round on
// a pool of goroutines. Client k draws from rng.New(seed, ID, round) (the
// generator is re-seeded in place, not allocated), so the uploads depend
// only on the seed, the broadcast and the client's own state.
type InMem struct {
	clients []Client
	workers int
	seed    uint64
	ups     []*Upload
	chunk   int
	// asked, when not nil, marks the clients asked this round (Cohorts):
	// the others sit it out, their Round not called, their uploads nil.
	asked []bool
}

// NewInMem returns an in-process transport for clients. workers <= 0 means
// runtime.GOMAXPROCS(0).
func NewInMem(clients []Client, workers int, seed uint64) (*InMem, error) {
	seen := make(map[int]int, len(clients))
	for k, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: client %d is nil", ErrClient, k)
		}
		if j, dup := seen[c.ID()]; dup {
			return nil, fmt.Errorf("%w: clients %d and %d share ID %d", ErrClient, j, k, c.ID())
		}
		seen[c.ID()] = k
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Chunks of clients small enough to balance, large enough to keep the
	// atomic counter cold.
	chunk := max(1, len(clients)/(workers*16))
	return &InMem{clients: clients, workers: workers, seed: seed, ups: make([]*Upload, len(clients)), chunk: chunk}, nil
}

// NumClients returns the number of clients.
func (t *InMem) NumClients() int { return len(t.clients) }

// Close does nothing.
func (t *InMem) Close() error { return nil }

// Exchange runs all clients on b. The returned slice is reused by the
// next Exchange.
func (t *InMem) Exchange(ctx context.Context, b *Broadcast) ([]*Upload, error) {
	n := len(t.clients)
	clear(t.ups)
	var next atomic.Int64
	var failed atomic.Bool
	errs := make([]error, t.workers)
	var wg sync.WaitGroup
	for w := 0; w < min(t.workers, max(1, n)); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			src := rand.NewChaCha8([32]byte{})
			r := rand.New(src)
			for !failed.Load() {
				if ctx.Err() != nil {
					errs[w] = ctx.Err()
					failed.Store(true)
					return
				}
				lo := int(next.Add(int64(t.chunk))) - t.chunk
				if lo >= n {
					return
				}
				for k := lo; k < min(lo+t.chunk, n); k++ {
					if t.asked != nil && !t.asked[k] {
						continue
					}
					c := t.clients[k]
					src.Seed(rng.Seed(t.seed, uint64(c.ID()), uint64(b.Round)))
					up, err := c.Round(b, r)
					if err != nil {
						errs[w] = fmt.Errorf("%w: client %d round %d: %w", ErrClient, c.ID(), b.Round, err)
						failed.Store(true)
						return
					}
					t.ups[k] = up
				}
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return t.ups, nil
}
