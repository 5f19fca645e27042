package deploy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/secagg"
)

// Hello returns the public plan.
func (s *Server) Hello(ctx context.Context, _ *connect.Request[fedv1.HelloRequest]) (*connect.Response[fedv1.HelloResponse], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.plan
	return connect.NewResponse(&fedv1.HelloResponse{
		Method: p.Method, Config: p.Config, TestMode: p.TestMode, State: s.state, Round: int32(s.round),
		Catalog:     &fedv1.Catalog{ItemIds: p.ItemIDs, Titles: p.Titles},
		Scale:       &fedv1.Scale{Min: float64(p.Scale.Min), Max: float64(p.Scale.Max), Step: float64(p.Scale.Step)},
		Aggregation: p.Aggregation,
		Enrolled:    int32(s.usersLocked()), MinClients: int32(s.cfg.MinClients),
	}), nil
}

// maxEnrol bounds the clients one Enroll call may create: the vendor
// client sends 10,000 a call, and a call's body is capped at enrolBytes.
const maxEnrol = 20000

// partyVendor is the party of every client enrolled with the shared token
// for one user.
const partyVendor = "vendor"

// partyPrefix starts the party of a client enrolled with the token for
// many users (EnrollRequest.users > 1): a party of its own, named by its
// credential's hash.
const partyPrefix = "party:"

// Enroll checks the token or the one-time code and issues one credential
// per secret the caller sent (one, with a secret of the server's, when it
// sent none). The server assigns the client IDs, consecutive in the
// order of the secrets and above every ID enrolled before: nobody picks
// one, so no two callers can ask for the same. A code enrols one client,
// once, as a party of its own; the token enrols any number of clients,
// all of the party "vendor". With EnrollRequest.users = w > 1 the token
// enrols one client that answers for w users as one secure-aggregation
// party (a party of its own): it counts as w users against MaxClients and
// wherever the server counts clients (Server.Users). A retry with the
// same secrets (and code, and users) succeeds with the same IDs.
func (s *Server) Enroll(ctx context.Context, req *connect.Request[fedv1.EnrollRequest]) (*connect.Response[fedv1.EnrollResponse], error) {
	secrets := req.Msg.GetSecrets()
	party := partyVendor
	users := max(1, int(req.Msg.GetUsers()))
	var code *[32]byte
	if c := req.Msg.GetCode(); c != "" {
		h := hashToken(c)
		code = &h
		party = "code:" + hex.EncodeToString(h[:6])
		if len(secrets) > 1 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("an enrolment code enrols one client, not %d", len(secrets)))
		}
	} else if tok := req.Msg.GetToken(); !sameHash(hashToken(tok), s.tok) {
		s.met.reject("enrol-token")
		if strings.HasPrefix(tok, CodePrefix) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong enrolment token (this is a one-time code: send it as the code)"))
		}
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong enrolment token"))
	}
	if len(secrets) > maxEnrol {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%d clients in one call; at most %d", len(secrets), maxEnrol))
	}
	switch {
	case users > 1 && code != nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a one-time code enrols one device; a party of %d users enrols with the token", users))
	case users > 1 && len(secrets) != 1:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("a party of %d users enrols as one client, with one secret of its own; this call has %d", users, len(secrets)))
	case users > 1 && s.cohortRun():
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("a party of %d users in a cohort run: a cohort takes devices, each answering for one user under its own participation limits", users))
	case users > s.cfg.MaxClients:
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("a party of %d users; this server takes at most %d users", users, s.cfg.MaxClients))
	}
	fromClient := len(secrets) > 0
	if !fromClient {
		var secret [24]byte
		if _, err := rand.Read(secret[:]); err != nil {
			return nil, connect.NewError(connect.CodeInternal, err)
		}
		secrets = []string{base64.RawURLEncoding.EncodeToString(secret[:])}
	}
	hashes := make([][32]byte, len(secrets))
	seen := make(map[[32]byte]bool, len(secrets))
	for k, sec := range secrets {
		if len(sec) < 16 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("secret %d: %d characters; at least 16", k, len(sec)))
		}
		hashes[k] = hashToken(sec)
		if seen[hashes[k]] {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("secret %d sent twice in one call", k))
		}
		seen[hashes[k]] = true
	}
	if users > 1 {
		party = partyPrefix + hex.EncodeToString(hashes[0][:6])
	}
	creds := func(ids []uint32) *connect.Response[fedv1.EnrollResponse] {
		out := make([]*fedv1.Credential, len(ids))
		for k, id := range ids {
			out[k] = &fedv1.Credential{ClientId: id, Token: strconv.FormatUint(uint64(id), 10) + "." + secrets[k]}
		}
		return connect.NewResponse(&fedv1.EnrollResponse{Credentials: out})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code != nil {
		id, cred, spent, err := s.st.codeUse(*code)
		switch {
		case errors.Is(err, errNoCode):
			s.met.reject("enrol-code")
			return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown enrolment code"))
		case err != nil:
			return nil, connect.NewError(connect.CodeInternal, err)
		case spent:
			if fromClient && sameHash(hashes[0], cred) {
				return creds([]uint32{id}), nil // a retry
			}
			s.met.reject("enrol-code")
			return nil, connect.NewError(connect.CodePermissionDenied, errors.New("enrolment code already used"))
		}
	}
	// A retry of a call that enrolled its clients (its answer was lost):
	// every secret is enrolled already, by this party.
	var again []uint32
	for _, h := range hashes {
		if id, ok := s.byHash[h]; ok && s.party[id] == party && s.weightOf(id) == users && code == nil {
			again = append(again, id)
		} else if ok {
			return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("a secret of this call is enrolled already: a new client sends a fresh secret, a retry the same secrets as the call it repeats"))
		}
	}
	switch {
	case fromClient && len(again) == len(hashes):
		return creds(again), nil
	case len(again) > 0:
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("%d of the %d secrets of this call are enrolled already: a retry sends the same secrets as the call it repeats, a new client a fresh secret", len(again), len(hashes)))
	}
	if s.state != fedv1.RunState_RUN_STATE_ENROLLING && !(s.cohortRun() && s.state == fedv1.RunState_RUN_STATE_RUNNING) {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("enrolment is closed: the run started with %s; a client joins a run before its first round (start the server with --min-clients N to wait for N clients, or join the next run)", clientsWord(s.usersLocked())))
	}
	if n := s.usersLocked() + users*len(hashes); n > s.cfg.MaxClients {
		// Not ResourceExhausted: clients retry that, and the cap stays.
		s.met.reject("enrol-cap")
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("%d clients would be enrolled; this server takes at most %d", n, s.cfg.MaxClients))
	}
	if uint64(s.nextID)+uint64(len(hashes)) > math.MaxUint32 {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("no client IDs left"))
	}
	ids := make([]uint32, len(hashes))
	for k := range ids {
		ids[k] = s.nextID + uint32(k)
	}
	switch err := s.st.enrol(ids, hashes, party, code, users); {
	case errors.Is(err, errNoCode):
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	case errors.Is(err, errCodeSpent):
		return nil, connect.NewError(connect.CodePermissionDenied, err)
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	for k, id := range ids {
		s.enrolled[id] = hashes[k]
		s.byHash[hashes[k]] = id
		s.party[id] = party
		if users > 1 {
			s.weight[id] = users
		}
	}
	s.nextID += uint32(len(ids))
	s.lastEnr = time.Now()
	s.met.setEnrolled(s.usersLocked())
	s.met.setParties(s.partiesLocked())
	return creds(ids), nil
}

// Parties returns the number of distinct parties among the enrolled
// clients: each client enrolled with a one-time code is a party of its
// own, every client enrolled with the shared token for one user belongs
// to one party, the vendor that holds those users, and each client
// enrolled with the token for many users (a vendor as one party,
// EnrollRequest.users) is a party of its own. This, not the number of
// client ids, is the population the colluding fraction γ of secure
// aggregation (secagg.DefaultCollusion, ChooseParams) speaks of: a vendor's ids
// count as one party in γ, since the vendor knows all of their inputs.
func (s *Server) Parties() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.partiesLocked()
}

// warnParties warns, for a masked run, about every party that holds more
// than the colluding fraction γ of the clients that secure aggregation
// is provisioned for: the ids of one party (a vendor's token) count as
// one party, so should it collude with the server, secure aggregation
// hides from them only the other parties' clients. The warning says what
// that means and what to do, in words an operator reads in the log.
// s.mu is held.
func (s *Server) warnParties() {
	total := s.usersLocked()
	if s.plan.Aggregation != "masked" || total == 0 {
		return
	}
	held := map[string]int{}
	for id, p := range s.party {
		if _, ok := s.enrolled[id]; ok {
			held[p] += s.weightOf(id)
		}
	}
	for p, n := range held {
		if float64(n) > secagg.DefaultCollusion*float64(total) {
			rest := fmt.Sprintf("the other %d clients sent, protected only by the noise they added themselves", total-n)
			if total-n == 1 {
				rest = "the one other client sent, protected only by the noise it added itself"
			}
			s.log.Warn(fmt.Sprintf("party %q holds %d of the %d clients, more than the %g%% that secure aggregation assumes may collude with the server", p, n, total, 100*secagg.DefaultCollusion),
				"meaning", fmt.Sprintf("if this party and the server colluded, they could subtract its %d clients' inputs (and noise) from each released sum and read what %s", n, rest),
				"what_to_do", "nothing if this party is trusted not to collude with the server (a simulation, the operator's own users); otherwise enrol more independent parties (devices with one-time codes: privrec enroll-codes) so that none holds more than that share",
				"party", p, "clients", n, "of", total, "gamma", secagg.DefaultCollusion)
		}
	}
}

// Users returns the number of users the enrolled clients answer for: one
// per client, and w for a party enrolled for w users
// (EnrollRequest.users). It is the count the server calibrates and checks
// by: the roster, the participation floor, the inputs of a masked sum, the
// ledger's enrolled and participants.
func (s *Server) Users() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usersLocked()
}

// usersLocked is Users with s.mu held.
func (s *Server) usersLocked() int {
	n := len(s.enrolled)
	for id, w := range s.weight {
		if _, ok := s.enrolled[id]; ok {
			n += w - 1
		}
	}
	return n
}

// weightOf returns the users client id answers for: 1 but for a party.
// s.mu is held.
func (s *Server) weightOf(id uint32) int {
	if w, ok := s.weight[id]; ok {
		return w
	}
	return 1
}

// partiesLocked is Parties with s.mu held.
func (s *Server) partiesLocked() int {
	seen := map[string]bool{}
	for _, p := range s.party {
		seen[p] = true
	}
	return len(seen)
}

// authenticate returns the client id of the request's bearer credential.
func (s *Server) authenticate(h http.Header) (uint32, error) {
	cred, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if !ok {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("no bearer credential"))
	}
	idText, secret, ok := strings.Cut(cred, ".")
	id, err := strconv.ParseUint(idText, 10, 32)
	if !ok || err != nil {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("malformed credential"))
	}
	s.mu.Lock()
	want, enrolled := s.enrolled[uint32(id)]
	s.mu.Unlock()
	if !enrolled || !sameHash(hashToken(secret), want) {
		return 0, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown credential"))
	}
	return uint32(id), nil
}
