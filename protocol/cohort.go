package protocol

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/privrec/privrec/rng"
)

// streamCohort labels the stream of an honest server's cohort choice
// (SeededCohort); it is far above any client ID, which labels the
// clients' streams.
const streamCohort uint64 = 0x636f_686f_7274 // "cohort"

// Limited is a client that enforces its own participation limits: it
// answers a training round (PhaseTrain) only when Participation.Allows
// holds for the training rounds it answered before, and otherwise sends
// nothing without reading its data (its inner Round is not called).
// Setup and final rounds pass through. It is the in-process stand-in for a
// deployment's client, which keeps the same memory durably across
// restarts; a round counts as answered as soon as the inner client is
// asked, whether or not it sends an upload, since its data was read.
type Limited struct {
	// Client is the wrapped client.
	Client
	p        Participation
	mu       sync.Mutex
	answered []int
}

// Limit wraps c with the participation limits p.
func Limit(c Client, p Participation) *Limited { return &Limited{Client: c, p: p} }

// Round answers b under the limits: nil, without asking the inner client,
// for a training round the limits forbid.
func (l *Limited) Round(b *Broadcast, r *rand.Rand) (*Upload, error) {
	if b.Phase == PhaseTrain {
		l.mu.Lock()
		if !l.p.Allows(l.answered, b.Round) {
			l.mu.Unlock()
			return nil, nil
		}
		l.answered = append(l.answered, b.Round)
		l.mu.Unlock()
	}
	return l.Client.Round(b, r)
}

// Allows reports whether the client's limits let it answer training round
// r after the rounds it answered so far.
func (l *Limited) Allows(r int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p.Allows(l.answered, r)
}

// Answered returns the training rounds the client answered, ascending.
func (l *Limited) Answered() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.answered)
}

// CohortChooser is a server's choice of the clients it asks in training
// round: size clients (0: all) out of eligible, the IDs of the clients
// whose limits allow the round (a server can tell from the rounds it saw
// each client answer). It may return any IDs, eligible or not, in any
// number (an adversarial server): a client outside its limits still sends
// nothing, and unknown IDs are ignored.
type CohortChooser func(round int, eligible []int, size int) []int

// SeededCohort returns an honest server's choice: size clients drawn
// uniformly without replacement among the eligible ones, from the stream
// rng.New(seed, streamCohort, round); all of them when size is 0 or at
// least their number.
func SeededCohort(seed uint64) CohortChooser {
	return func(round int, eligible []int, size int) []int {
		out := slices.Clone(eligible)
		if size <= 0 || size >= len(out) {
			return out
		}
		r := rng.New(seed, streamCohort, uint64(round))
		for i := range size {
			j := i + r.IntN(len(out)-i)
			out[i], out[j] = out[j], out[i]
		}
		out = out[:size]
		slices.Sort(out)
		return out
	}
}

// Cohorts is an in-process transport for a run over cohorts of a
// population: each training round (PhaseTrain) it asks only the clients
// its chooser picks, the others sit the round out (their uploads are nil
// and their Round is not called); setup and final rounds go to every
// client. Every client is wrapped in Limit, so it enforces the
// participation limits itself whatever the chooser picks.
type Cohorts struct {
	in     *InMem
	lim    []*Limited
	byID   map[int]int
	p      Participation
	choose CohortChooser
	asked  []bool
	last   []int
}

// NewCohorts returns the cohort transport of clients under the limits p,
// with the cohort of each training round picked by choose (nil:
// SeededCohort(seed)) among the clients whose limits allow the round.
// workers and seed are InMem's.
func NewCohorts(clients []Client, p Participation, choose CohortChooser, workers int, seed uint64) (*Cohorts, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("protocol: participation: %w", err)
	}
	c := &Cohorts{p: p, choose: choose, byID: make(map[int]int, len(clients)), asked: make([]bool, len(clients))}
	if c.choose == nil {
		c.choose = SeededCohort(seed)
	}
	wrapped := make([]Client, len(clients))
	for k, cl := range clients {
		if cl == nil {
			return nil, fmt.Errorf("%w: client %d is nil", ErrClient, k)
		}
		l := Limit(cl, p)
		c.lim = append(c.lim, l)
		wrapped[k] = l
		c.byID[cl.ID()] = k
	}
	in, err := NewInMem(wrapped, workers, seed)
	if err != nil {
		return nil, err
	}
	c.in = in
	return c, nil
}

// NumClients returns the number of clients of the population.
func (c *Cohorts) NumClients() int { return len(c.lim) }

// Close does nothing.
func (c *Cohorts) Close() error { return nil }

// Answered returns the training rounds client id answered, ascending (nil
// for an unknown id).
func (c *Cohorts) Answered(id int) []int {
	k, ok := c.byID[id]
	if !ok {
		return nil
	}
	return c.lim[k].Answered()
}

// LastCohort returns the IDs the chooser picked for the last training
// round (those of the population's clients).
func (c *Cohorts) LastCohort() []int { return slices.Clone(c.last) }

// Exchange asks the round's cohort (a training round) or every client
// (any other round) and returns the uploads in client order, nil for a
// client that was not asked or sent nothing.
func (c *Cohorts) Exchange(ctx context.Context, b *Broadcast) ([]*Upload, error) {
	if b.Phase != PhaseTrain {
		c.in.asked = nil
		return c.in.Exchange(ctx, b)
	}
	var eligible []int
	for _, l := range c.lim {
		if l.Allows(b.Round) {
			eligible = append(eligible, l.ID())
		}
	}
	clear(c.asked)
	c.last = c.last[:0]
	for _, id := range c.choose(b.Round, eligible, c.p.Cohort) {
		if k, ok := c.byID[id]; ok && !c.asked[k] {
			c.asked[k] = true
			c.last = append(c.last, id)
		}
	}
	c.in.asked = c.asked
	defer func() { c.in.asked = nil }()
	return c.in.Exchange(ctx, b)
}
