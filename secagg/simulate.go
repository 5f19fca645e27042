package secagg

import (
	"context"
	"crypto/rand"
	"errors"
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

// SimulateSum runs a round in process over inputs with no dropouts, its
// neighbour graph drawn from seed and its degree and threshold
// provisioned for DefaultDropout and DefaultCollusion, and returns the
// sum mod 2^bits: a protocol.SumProtocol (the in-process secure
// aggregation of protocol.MaskedSum).
func SimulateSum(seed [32]byte, bits int, inputs [][]uint32) ([]uint32, error) {
	n := len(inputs)
	k, t, err := ChooseParams(n, DefaultDropout, DefaultCollusion)
	if err != nil {
		return nil, err
	}
	return Simulate(Params{N: n, K: k, T: t, Bits: bits, Len: len(inputs[0]), Seed: seed}, inputs, nil, nil)
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
	// stays says whether client u sends its message of step.
	stays := func(u int, st Step) bool {
		if drop == nil {
			return true
		}
		switch drop[u] {
		case DropBeforeKeys:
			return false
		case DropBeforeShares:
			return st < StepShares
		case DropBeforeInput:
			return st < StepMasked
		case DropBeforeUnmask:
			return st <= StepMasked
		}
		return true
	}
	srv, err := NewServer(p)
	if err != nil {
		return nil, err
	}
	ses := NewSession(srv, nil)
	ctx := context.Background()
	clients := make([]*Client, p.N)
	msgs := make([]Message, p.N) // each client's message of the open step, nil once out
	err = parallel(p.N, runtime.GOMAXPROCS(0), func(u int) error {
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
		if !stays(u, First(p.Active)) {
			return nil
		}
		msgs[u], err = c.Start(inputs[u])
		return err
	})
	if err != nil {
		return nil, err
	}
	return lockstep(ctx, ses, clients, msgs, stays, runtime.GOMAXPROCS(0), nil)
}

// MaskedInputs runs a session's steps in process up to the masked
// inputs, one client at a time in position order, client u holding
// inputs[u], and returns what the server receives: every client's masked
// input, by position. rand supplies the clients' randomness (nil:
// crypto/rand); with a deterministic one the result is reproducible. It
// serves audits that attack the server's view.
func MaskedInputs(p Params, inputs [][]uint32, rnd io.Reader) ([]*MaskedInput, error) {
	if len(inputs) != p.N {
		return nil, fmt.Errorf("secagg: MaskedInputs: %d inputs for %d clients", len(inputs), p.N)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	srv, err := NewServer(p)
	if err != nil {
		return nil, err
	}
	clients := make([]*Client, p.N)
	msgs := make([]Message, p.N)
	for u := range clients {
		if clients[u], err = NewClient(uint32(u), p, rnd); err != nil {
			return nil, err
		}
		if msgs[u], err = clients[u].Start(inputs[u]); err != nil {
			return nil, err
		}
	}
	// Stopped once the masked step closed, msgs holds what was sent in it.
	if _, err := lockstep(context.Background(), NewSession(srv, nil), clients, msgs, nil, 1, func(st Step) bool { return st == StepMasked }); err != nil {
		return nil, err
	}
	out := make([]*MaskedInput, p.N)
	for u, m := range msgs {
		out[u], _ = m.(*MaskedInput)
	}
	return out, nil
}

// lockstep runs session ses in process with every client at once: each
// client in msgs sends its message of the open step (unless stays says it
// drops out), the step closes, and each gets its reply and computes its
// next message, on workers goroutines. stop, when not nil, is asked after each step closed
// whether to end there. It returns the sum, or the first error of the
// server or of a client that did not drop.
func lockstep(ctx context.Context, ses *Session, clients []*Client, msgs []Message, stays func(int, Step) bool, workers int, stop func(Step) bool) ([]uint32, error) {
	for ses.Open() < NumSteps {
		st := ses.Open()
		err := parallel(len(msgs), workers, func(u int) error {
			if msgs[u] == nil {
				return nil
			}
			if stays != nil && !stays(u, st) {
				msgs[u] = nil
				return nil
			}
			return ses.Add(ctx, msgs[u])
		})
		if err != nil {
			return nil, err
		}
		if _, err := ses.Close(ctx); err != nil {
			return nil, err
		}
		ses.Release()
		if stop != nil && stop(st) {
			return nil, nil
		}
		err = parallel(len(msgs), workers, func(u int) error {
			if msgs[u] == nil {
				return nil
			}
			r, err := ses.Reply(ctx, st, uint32(u))
			if errors.Is(err, ErrNoReply) {
				msgs[u] = nil // left out by the server
				return nil
			}
			if err != nil {
				return err
			}
			if msgs[u], err = clients[u].Next(r); err != nil {
				return fmt.Errorf("client %d: %w", u, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ses.Result()
}

// parallel runs f(0..n-1) on workers goroutines and returns the first
// error.
func parallel(n, workers int, f func(int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range min(workers, n) {
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
