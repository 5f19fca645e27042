package deploy

import (
	"context"
	"fmt"
	"slices"
	"sync"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
)

// The clients' side of participation limits and cohort rounds.
//
// A client answers a training round only if the plan's participation
// limits (protocol.Method.Participation: MaxRounds, MinGap) allow it
// given the training rounds it answered before, which the session keeps
// with its memory across restarts (ClientConfig.Memory). In a cohort run
// it answers only a round whose cohort it asked to join and was taken
// into: a server that names it in a round's plan without that gets
// nothing from it. So the limits hold whatever clients the server asks.

// trainedOf returns the training rounds client k answered.
func (s *Session) trainedOf(k int) []int {
	if k < len(s.trained) {
		return s.trained[k]
	}
	return nil
}

// allowed reports whether client k may answer round r of phase by the
// plan's participation limits (a setup or final round: always; a setup
// is answered once per run, which checkBroadcast enforces).
func (s *Session) allowed(k, r int, phase string) bool {
	if phase != protocol.PhaseTrain {
		return true
	}
	return s.part.Allows(s.trainedOf(k), r)
}

// takers returns, for round b, which clients answer it: those the limits
// allow and, in a cohort run, that were taken into its cohort (joined;
// nil outside a cohort run). It returns nil when every client answers.
func (s *Session) takers(b *protocol.Broadcast, joined []bool, joinedRound int) []bool {
	cohort := s.part.Cohort > 0 && b.Phase != protocol.PhaseFinal
	if !s.part.Limited() && !cohort {
		return nil
	}
	take := make([]bool, len(s.creds))
	for k := range take {
		take[k] = s.allowed(k, b.Round, b.Phase) && (!cohort || (joinedRound == b.Round && k < len(joined) && joined[k]))
	}
	return take
}

// joinCohort offers the session's clients that may answer the round
// gathered in g to its cohort, one Join call each, and returns which were
// taken, and the credential of one taken client (to wait for the round
// with), or "" when none was.
func (s *Session) joinCohort(ctx context.Context, after int, g *fedv1.Gathering, creds []string) ([]bool, string, error) {
	r := int(g.GetRound())
	if s.rounds > 0 && (r < 0 || r >= s.rounds) {
		return nil, "", fmt.Errorf("%w: deploy: a cohort is gathered for round %d, past the plan's rounds (0 to %d): refusing", protocol.ErrMessage, r, s.rounds-1)
	}
	joined := make([]bool, len(creds))
	var mu sync.Mutex
	var first error
	wait := ""
	full := false
	parallel(len(creds), s.cfg.Workers, func(k int) {
		mu.Lock()
		stop := full || first != nil
		mu.Unlock()
		// (A simulated dropout, ClientConfig.Dropout, joins and then
		// sits the round out, as a device that goes offline once taken;
		// a device offline in its Population, or not enrolled yet, does
		// not offer to join.)
		if stop || !s.allowed(k, r, g.GetPhase()) || !s.online(k, r) {
			return
		}
		var resp *fedv1.GetRoundResponse
		err := s.retry(ctx, "join", func(ctx context.Context) error {
			got, err := s.api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: int32(after), Join: true}, creds[k]))
			if err == nil {
				resp = got.Msg
			}
			return err
		})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			first = cmpErr(first, fmt.Errorf("deploy: client %d joining round %d: %w", k, r, err))
		case resp.GetInCohort() && resp.GetGathering().GetRound() == int32(r):
			// Taken while the cohort was gathered. (An answer that the
			// round already opened with this client in it is not a
			// join: a server may name anyone in a round's plan.)
			joined[k] = true
			if wait == "" {
				wait = creds[k]
			}
		case resp.GetGathering() == nil || resp.GetGathering().GetTaken() >= resp.GetGathering().GetCohort():
			full = true // the cohort closed without this client
		}
	})
	return joined, wait, first
}

// trainedCopy returns the per-client training rounds have, for n
// clients, with round r added for the clients in take (all when take is
// nil).
func trainedCopy(have [][]int, n, r int, take []bool) [][]int {
	out := make([][]int, n)
	for k := range out {
		if k < len(have) {
			out[k] = slices.Clone(have[k])
		}
		if take == nil || take[k] {
			if t := out[k]; len(t) == 0 || t[len(t)-1] < r {
				out[k] = append(t, r)
			}
		}
	}
	return out
}

// awaitOpen waits, as the taken client of credential cred, for round r
// gathered after `after` to open, and returns the response that carries
// it (or the run's end).
func (s *Session) awaitOpen(ctx context.Context, after, r int, cred string) (*fedv1.GetRoundResponse, error) {
	for {
		var resp *fedv1.GetRoundResponse
		err := s.retry(ctx, "get round", func(ctx context.Context) error {
			got, err := s.api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: int32(after)}, cred))
			if err == nil {
				resp = got.Msg
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if resp.GetState() == fedv1.RunState_RUN_STATE_DONE || resp.GetBroadcast() != nil {
			return resp, nil
		}
		if g := resp.GetGathering(); g == nil || int(g.GetRound()) != r || !resp.GetInCohort() {
			// The gathering ended without opening the round, or no
			// longer holds this client (a server restart gathers
			// afresh): the caller polls, and joins, again.
			return resp, nil
		}
	}
}

// leaves reports, for ClientConfig.LeaveWhenSpent, whether every client
// of the session is done with the cohort run whose progress resp shows
// (protocol.Participation.Done): its limits let it answer no later
// round, and the last round it answered is over, so that round's
// release, if it released, is out.
func (s *Session) leaves(resp *fedv1.GetRoundResponse) bool {
	if !s.cfg.LeaveWhenSpent || (resp.GetGathering() == nil && resp.GetBroadcast() == nil) {
		return false // nothing open yet: no round to read progress from
	}
	now := max(int(resp.GetGathering().GetRound()), int(resp.GetBroadcast().GetRound()))
	for k := range s.creds {
		// Any round after the setup may train: dp-als ends with a final
		// round, dp-ease with its last Gram round. (Counting a final
		// round as one costs at most a wait for the final model.)
		if !s.part.Done(s.trainedOf(k), now, s.rounds-1) {
			return false
		}
	}
	return true
}
