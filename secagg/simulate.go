package secagg

import (
	"crypto/rand"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// Phase says when a simulated client drops out.
type Phase int

const (
	// Stay: the client takes part in every round.
	Stay Phase = iota
	// DropBeforeKeys: the client never advertises keys.
	DropBeforeKeys
	// DropBeforeShares: the client advertises keys but sends no shares.
	DropBeforeShares
	// DropBeforeInput: the client shares its keys but sends no masked
	// input; its input is not in the sum and the server must reconstruct
	// its mask key to remove its pairwise masks.
	DropBeforeInput
	// DropBeforeUnmask: the client uploads its masked input, then
	// vanishes; its input is in the sum, but it reveals no shares.
	DropBeforeUnmask
)

// lockedReader makes a reader safe for concurrent use.
type lockedReader struct {
	mu sync.Mutex
	r  io.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

// Simulate runs one round in process: a server and p.N clients, client u
// holding inputs[u] and dropping out as drop[u] says (nil: nobody drops).
// Clients run concurrently on GOMAXPROCS goroutines. rand supplies the
// clients' randomness (nil: crypto/rand). It returns the server's result,
// or the first error of the server or of any client that did not drop.
func Simulate(p Params, inputs [][]uint32, drop []Phase, rnd io.Reader) ([]uint32, error) {
	return simulate(p, nil, inputs, drop, rnd)
}

// SimulateActive is Simulate for the active protocol (p.Active): client
// u holds auths[u]. A client dropping before the unmasking drops before
// the consistency round.
func SimulateActive(p Params, auths []*Auth, inputs [][]uint32, drop []Phase, rnd io.Reader) ([]uint32, error) {
	if !p.Active || len(auths) != p.N {
		return nil, fmt.Errorf("secagg: SimulateActive needs Params.Active and %d identities", p.N)
	}
	return simulate(p, auths, inputs, drop, rnd)
}

func simulate(p Params, auths []*Auth, inputs [][]uint32, drop []Phase, rnd io.Reader) ([]uint32, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(inputs) != p.N || (drop != nil && len(drop) != p.N) {
		return nil, fmt.Errorf("secagg: Simulate: %d inputs and %d phases for %d clients", len(inputs), len(drop), p.N)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	rnd = &lockedReader{r: rnd}
	phase := func(u uint32) Phase {
		if drop == nil {
			return Stay
		}
		return drop[u]
	}
	srv, err := NewServer(p)
	if err != nil {
		return nil, err
	}
	clients := make([]*Client, p.N)
	err = parallel(p.N, func(u int) error {
		var c *Client
		var err error
		if auths != nil {
			c, err = NewActiveClient(uint32(u), p, rnd, auths[u])
		} else {
			c, err = NewClient(uint32(u), p, rnd)
		}
		if err != nil {
			return err
		}
		clients[u] = c
		if phase(uint32(u)) == DropBeforeKeys {
			return nil
		}
		if p.Active {
			m, err := c.Commit()
			if err != nil {
				return err
			}
			return srv.AddCommit(m)
		}
		m, err := c.AdvertiseKeys()
		if err != nil {
			return err
		}
		return srv.AddKeys(m)
	})
	if err != nil {
		return nil, err
	}
	if p.Active { // the commitments closed, every committed client reveals
		set, err := srv.FinishCommit()
		if err != nil {
			return nil, err
		}
		err = parallel(p.N, func(u int) error {
			if phase(uint32(u)) == DropBeforeKeys {
				return nil
			}
			m, err := clients[u].Reveal(set)
			if err != nil {
				return err
			}
			return srv.AddKeys(m)
		})
		if err != nil {
			return nil, err
		}
	}
	kb, err := srv.FinishKeys()
	if err != nil {
		return nil, err
	}
	err = parallel(len(kb), func(i int) error {
		u := kb[i].To
		if phase(u) == DropBeforeShares {
			return nil
		}
		m, err := clients[u].ShareKeys(kb[i])
		if err != nil {
			return fmt.Errorf("client %d: %w", u, err)
		}
		return srv.AddShares(m)
	})
	if err != nil {
		return nil, err
	}
	sd, err := srv.FinishShares()
	if err != nil {
		return nil, err
	}
	err = parallel(len(sd), func(i int) error {
		u := sd[i].To
		if phase(u) == DropBeforeInput {
			return nil
		}
		m, err := clients[u].MaskedInput(sd[i], inputs[u])
		if err != nil {
			return fmt.Errorf("client %d: %w", u, err)
		}
		return srv.AddMaskedInput(m)
	})
	if err != nil {
		return nil, err
	}
	ur, err := srv.FinishMaskedInput()
	if err != nil {
		return nil, err
	}
	if p.Active {
		err = parallel(len(ur), func(i int) error {
			u := ur[i].To
			if phase(u) == DropBeforeUnmask {
				return nil
			}
			m, err := clients[u].Consistency(ur[i])
			if err != nil {
				return fmt.Errorf("client %d: %w", u, err)
			}
			return srv.AddConsistency(m)
		})
		if err != nil {
			return nil, err
		}
		if ur, err = srv.FinishConsistency(); err != nil {
			return nil, err
		}
	}
	err = parallel(len(ur), func(i int) error {
		u := ur[i].To
		if phase(u) == DropBeforeUnmask {
			return nil
		}
		m, err := clients[u].Unmask(ur[i])
		if err != nil {
			return fmt.Errorf("client %d: %w", u, err)
		}
		return srv.AddUnmask(m)
	})
	if err != nil {
		return nil, err
	}
	return srv.Result()
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines and returns the first
// error.
func parallel(n int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}
