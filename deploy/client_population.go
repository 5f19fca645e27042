package deploy

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/privrec/privrec/protocol"
)

// The simulating client's population (ClientConfig.Population): which of
// the session's clients are enrolled, present and online in a round, and
// which leave a round after their encrypted shares.

// errLeftAfterShares is a simulated device's end of a round it left
// after sending its encrypted shares (Population.DropAfterShares).
var errLeftAfterShares = errors.New("deploy: simulated device went offline after its encrypted shares")

// popState is a session's view of its population: each client's device
// label, arrival, departure and time zone, drawn once, and the clients
// not enrolled yet.
type popState struct {
	p      Population
	seed   uint64
	dev    []int // client k's device label (protocol.Client.ID)
	arrive []int
	depart []int
	zone   []int
	// pending are the clients not enrolled yet, by arrival; secrets
	// their enrolment secrets.
	pending []int
	secrets []string
}

// checkPopulation validates cfg.Population at Dial and draws the
// population's seed: the session's in test mode, else a fresh one.
func checkPopulation(cfg *ClientConfig) (uint64, error) {
	p := cfg.Population
	if p == nil {
		return 0, nil
	}
	if err := p.Validate(); err != nil {
		return 0, err
	}
	switch {
	case cfg.OneParty:
		return 0, errors.New("deploy: a party holds its users' ratings and answers for all of them: a simulated population (devices that come and go) does not apply")
	case cfg.Code != "":
		return 0, errors.New("deploy: a simulated population needs a vendor's token: a one-time code enrols one device")
	case p.Late > 0 && (cfg.Authority != nil || cfg.Identities != nil):
		return 0, errors.New("deploy: late arrivals enrol during the run, and certified identities are made for the clients enrolled before it: run the population without late arrivals, or without an authority")
	}
	if cfg.Seeded {
		return cfg.Seed, nil
	}
	var b [8]byte
	crand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:]), nil
}

// initPopulation draws the population of clients (nil without
// ClientConfig.Population) and returns the clients to enrol now: those
// that arrive at round 0 (all: nil).
func (s *Session) initPopulation(clients []protocol.Client) []bool {
	if s.cfg.Population == nil {
		return nil
	}
	p := *s.cfg.Population
	n := len(clients)
	ps := &popState{p: p, seed: s.popSeed, dev: make([]int, n), arrive: make([]int, n), depart: make([]int, n), zone: make([]int, n)}
	now := make([]bool, n)
	for k, c := range clients {
		d := c.ID()
		ps.dev[k], ps.arrive[k], ps.depart[k], ps.zone[k] = d, p.Arrival(ps.seed, d), p.Departure(ps.seed, d), p.Zone(ps.seed, d)
		if ps.arrive[k] == 0 {
			now[k] = true
		} else {
			ps.pending = append(ps.pending, k)
		}
	}
	slices.SortStableFunc(ps.pending, func(a, b int) int { return ps.arrive[a] - ps.arrive[b] })
	s.pop = ps
	return now
}

// online reports whether client k is enrolled and online in round r
// (always without a population).
func (s *Session) online(k, r int) bool {
	ps := s.pop
	if ps == nil {
		return true
	}
	if k >= len(s.creds) || s.creds[k] == "" || r < ps.arrive[k] || r >= ps.depart[k] {
		return false
	}
	q := ps.p.OnlineProb(ps.zone[k], r)
	return q >= 1 || unit(ps.seed, uint64(ps.dev[k]), drawOnline, uint64(r)) < q
}

// leavesAfterShares reports whether client k goes offline after its
// encrypted shares in round r, a training round.
func (s *Session) leavesAfterShares(k, r int) bool {
	ps := s.pop
	return ps != nil && s.phase == protocol.PhaseTrain && ps.p.DropsAfterShares(ps.seed, ps.dev[k], r)
}

// arrive enrols the clients that arrive by round r (late arrivals) and
// were not enrolled yet.
func (s *Session) arrive(ctx context.Context, r int) error {
	ps := s.pop
	if ps == nil || len(ps.pending) == 0 || ps.arrive[ps.pending[0]] > r {
		return nil
	}
	n := 0
	for n < len(ps.pending) && ps.arrive[ps.pending[n]] <= r {
		n++
	}
	due := slices.Clone(ps.pending[:n])
	slices.Sort(due) // enrolled in the clients' order, as at the start
	if err := s.enrolSome(ctx, due, ps.secrets); err != nil {
		return err
	}
	ps.pending = ps.pending[n:]
	s.log.Info("late devices enrolled", "round", r, "devices", n, "still_to_come", len(ps.pending))
	return nil
}

// PopulationCounts is what a session's population looked like in one
// round: for tests and reports.
type PopulationCounts struct {
	Enrolled, Present, Online int
}

// PopulationAt counts the session's clients enrolled, present and online
// in round r (every client without a population).
func (s *Session) PopulationAt(r int) PopulationCounts {
	if s.pop == nil {
		n := len(s.creds)
		return PopulationCounts{n, n, n}
	}
	var c PopulationCounts
	for k := range s.creds {
		if s.creds[k] == "" {
			continue
		}
		c.Enrolled++
		if r >= s.pop.arrive[k] && r < s.pop.depart[k] {
			c.Present++
		}
		if s.online(k, r) {
			c.Online++
		}
	}
	return c
}

// lead returns the credential the session polls the server with: the
// first enrolled client's.
func (s *Session) lead() (string, error) {
	for _, c := range s.creds {
		if c != "" {
			return c, nil
		}
	}
	return "", fmt.Errorf("deploy: none of the %d clients arrives at the start (population %s): nothing to follow the run with", len(s.creds), s.cfg.Population)
}
