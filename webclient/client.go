package webclient

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/privrec/privrec/dpals"
	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/secagg"
)

// Service is the path prefix of the federation service's procedures.
const Service = "/privrec.federation.v1.FederationService/"

// Transport posts one Connect unary call: body to path (Service plus the
// procedure) with the given headers, returning the HTTP status and body.
type Transport interface {
	Post(ctx context.Context, path string, header map[string]string, body []byte) (status int, resp []byte, err error)
}

// Rating is one of the person's ratings: an index into the catalog and
// a value on the run's scale.
type Rating struct {
	Item  int     `json:"item"`
	Value float32 `json:"value"`
}

// Sent counts what this client sent the server, by kind.
type Sent struct {
	Calls        int   `json:"calls"`
	Bytes        int64 `json:"bytes"`
	MaskedRounds int   `json:"maskedRounds"`
	MaskedBytes  int64 `json:"maskedBytes"`
	EmptyUploads int   `json:"emptyUploads"`
	// Ratings and RatedItems are what the browser sent of its ratings
	// and of its list of rated items: always 0, by construction (the
	// client has no code path that sends them); the page shows them so
	// that a person can see it.
	Ratings    int `json:"ratings"`
	RatedItems int `json:"ratedItems"`
}

// Event reports a round this client answered.
type Event struct {
	Round  int    `json:"round"`
	Phase  string `json:"phase"`
	Masked bool   `json:"masked"`
	// Took is the round's time from the broadcast's arrival to the last
	// step's answer, waits for the other clients included; Compute the
	// client's own computation in it (its statistics, the masking and
	// the secure-aggregation steps).
	TookMS    float64 `json:"tookMs"`
	ComputeMS float64 `json:"computeMs"`
	Words     int     `json:"words"`
	// EpsSoFar is the run's ε at δ in the server's ledger when the round
	// opened (the rounds before it); 0 when none was spent yet.
	EpsSoFar float64 `json:"epsSoFar"`
	// Clients is the number of clients in the round's secure
	// aggregation (0 for a plain round).
	Clients int    `json:"clients"`
	Err     string `json:"err,omitempty"`
	Sent    Sent   `json:"sent"`
}

// Status reports where the run is while the client waits on it, after
// every answer of the server and while it does not answer.
type Status struct {
	// State is "enrolling", "running" or "done".
	State string `json:"state"`
	// Enrolled counts the clients enrolled; MinClients is the number the
	// run waits for before its first round.
	Enrolled   int `json:"enrolled"`
	MinClients int `json:"minClients"`
	// Unreachable is set while the server does not answer: for
	// SilentSec seconds so far, and the client gives up (ErrLost) in
	// GivesUpInSec.
	Unreachable  bool    `json:"unreachable,omitempty"`
	SilentSec    float64 `json:"silentSec,omitempty"`
	GivesUpInSec float64 `json:"givesUpInSec,omitempty"`
	// SatOut, when set, says the page sits out a round of a cohort run
	// (it sends nothing of it) and why; the status carries nothing else.
	SatOut *SitOut `json:"satOut,omitempty"`
}

// SitOut is a round of a cohort run the page takes no part in.
type SitOut struct {
	Round int `json:"round"`
	// Why is "limits" when the plan's participation limits refuse the
	// round, "cohort" when the page offered to join and was not taken.
	Why string `json:"why"`
	// Trained lists the training rounds the page answered in the run;
	// MaxRounds and MinGap are the plan's limits (0: none).
	Trained   []int `json:"trained"`
	MaxRounds int   `json:"maxRounds"`
	MinGap    int   `json:"minGap"`
}

// ErrLost is the error of a call that got no answer from the server for
// Client.LostAfter: it may have stopped.
var ErrLost = errors.New("webclient: lost the server")

// Client is one browser's side of a run.
type Client struct {
	t     Transport
	plan  *Hello
	cfg   dpals.Config   // a dp-als or dp-biases run's
	ease  *dpease.Config // a dp-ease run's (nil for dp-als)
	scale ratings.Scale
	cred  string
	sent  Sent
	// The last round answered, and its server's boot and session: kept
	// across Train calls, so a client that joins again never sends a
	// second masked vector for a round it answered.
	last          int32
	boot, session string
	// setup is the setup round answered (-1: none): a second one is
	// refused.
	setup int32
	// digest is the plan's (webPlanDigest), rounds its number of rounds;
	// mem is the page's memory, saved to store before any answer leaves.
	digest string
	rounds int
	mem    *Memory
	store  Store
	// part is the plan's participation (cohorts, limits), which the page
	// enforces itself; trained the training rounds it answered
	// (ascending, kept in mem), which the limits count; joined the round
	// whose cohort it was taken into while it was gathered (-1: none);
	// sawFinal whether it answered dp-als's final round in this Train.
	part     protocol.Participation
	trained  []int
	joined   int32
	sawFinal bool
	// trust, when not nil, is what the person pinned for the active
	// protocol; ident the device's identity key and cert its checked
	// certificate.
	trust *Trust
	// insecure: the person allowed the honest-but-curious protocol with
	// no authority pinned (AllowInsecure).
	insecure bool
	ident    *Identity
	cert     *secagg.Certificate
	// status, when not nil, hears of the server's silence (retry).
	status func(Status)
	// Log, when not nil, receives progress lines.
	Log func(string)
	// LostAfter bounds how long a call is retried while the server does
	// not answer at all (the network fails, or a proxy answers 502–504):
	// after it the call fails with ErrLost. 0 means 30 s. Answers of a
	// live server that say "retry" (a round not open yet) do not count.
	LostAfter time.Duration
}

// New reads the server's plan (the body of a Hello call) and checks that
// the page can take part: dp-ease, dp-als or dp-biases, with masked
// aggregation; over cohorts with participation limits or not (the page
// enforces the limits itself: see the package doc).
func New(t Transport, hello []byte) (*Client, error) {
	var h Hello
	if err := json.Unmarshal(hello, &h); err != nil {
		return nil, fmt.Errorf("webclient: the server's plan: %w", err)
	}
	var (
		cfg  dpals.Config
		ease *dpease.Config
		agg  protocol.Aggregation
		err  error
	)
	var rounds int
	if h.Method == "dp-ease" {
		var ec dpease.Config
		ec, err = dpeaseConfig(h.Config)
		ease, agg, rounds = &ec, ec.Aggregation, dpeaseRounds(ec)
	} else {
		cfg, err = dpalsConfig(h.Method, h.Config)
		agg, rounds = cfg.Aggregation, dpalsRounds(cfg)
	}
	if err != nil {
		return nil, err
	}
	part := cfg.Participation()
	if ease != nil {
		part = ease.Participation()
	}
	if err := part.Validate(); err != nil {
		return nil, fmt.Errorf("webclient: the plan's participation: %w", err)
	}
	if h.Aggregation != "masked" || agg != protocol.AggMasked {
		return nil, fmt.Errorf("webclient: the server runs %s with aggregation %q; the page takes part only in masked rounds (secure aggregation), where the server sees sums", h.Method, h.Aggregation)
	}
	if len(h.Catalog.Titles) != 0 && len(h.Catalog.Titles) != len(h.Catalog.ItemIDs) {
		return nil, fmt.Errorf("webclient: the plan's catalog has %d items and %d titles", len(h.Catalog.ItemIDs), len(h.Catalog.Titles))
	}
	sc := ratings.Scale{Min: float32(h.Scale.Min), Max: float32(h.Scale.Max), Step: float32(h.Scale.Step)}
	if !(sc.Max > sc.Min) {
		return nil, fmt.Errorf("webclient: the plan's scale %v is empty", sc)
	}
	return &Client{t: t, plan: &h, cfg: cfg, ease: ease, scale: sc, last: -1, setup: -1, joined: -1,
		digest: webPlanDigest(&h), rounds: rounds, part: part}, nil
}

// Plan returns the server's plan.
func (c *Client) Plan() *Hello { return c.plan }

// PlanDigest names the run's plan (protocol.PlanDigest): the key of the
// page's memory of the rounds it answered, the same name the
// command-line client gives the plan.
func (c *Client) PlanDigest() string { return c.digest }

// Config returns the run's configuration: a *dpease.Config for a dp-ease
// run, else a *dpals.Config.
func (c *Client) Config() any {
	if c.ease != nil {
		e := *c.ease
		return &e
	}
	a := c.cfg
	return &a
}

// Sent returns what the client sent so far.
func (c *Client) Sent() Sent { return c.sent }

// SetCredential sets the credential of an earlier enrolment (kept by
// the page across reloads).
func (c *Client) SetCredential(cred string) { c.cred = cred }

func (c *Client) logf(format string, a ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, a...))
	}
}

// CodeError is a Connect error answer.
type CodeError struct {
	Status  int
	Code    string
	Message string
}

func (e *CodeError) Error() string {
	return fmt.Sprintf("webclient: the server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// call posts a Connect JSON call of procedure proc.
func (c *Client) call(ctx context.Context, proc string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	h := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
	if c.cred != "" && proc != "Enroll" && proc != "Hello" {
		h["Authorization"] = "Bearer " + c.cred
	}
	c.sent.Calls++
	c.sent.Bytes += int64(len(body))
	status, out, err := c.t.Post(ctx, Service+proc, h, body)
	if err != nil {
		return fmt.Errorf("webclient: %s: %w", proc, err)
	}
	if status != 200 {
		var ce connectError
		_ = json.Unmarshal(out, &ce)
		if ce.Code == "" {
			ce.Code, ce.Message = "unknown", strings.TrimSpace(string(out))
		}
		return &CodeError{Status: status, Code: ce.Code, Message: ce.Message}
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("webclient: %s: the answer: %w", proc, err)
	}
	return nil
}

// retryable reports whether err may pass by itself (the network, a round
// not open yet, a busy server).
func retryable(err error) bool {
	var ce *CodeError
	if !errors.As(err, &ce) {
		return true // the network
	}
	switch ce.Code {
	case "unavailable", "deadline_exceeded", "unknown", "aborted", "resource_exhausted", "internal", "canceled":
		return true
	}
	return false
}

// silent reports whether err means no answer from the server: the
// network failed, or something in front of it answered 502–504 without
// a Connect error.
func silent(err error) bool {
	var ce *CodeError
	if !errors.As(err, &ce) {
		return true
	}
	return ce.Code == "unknown" && ce.Status >= 502 && ce.Status <= 504
}

// retry calls f until it succeeds, fails for good, ctx ends, or the
// server has not answered for LostAfter (ErrLost), telling c.status
// while it is silent.
func (c *Client) retry(ctx context.Context, f func() error) error {
	lost := c.LostAfter
	if lost <= 0 {
		lost = 30 * time.Second
	}
	wait := 50 * time.Millisecond
	var since time.Time // the first of the failures in a row without an answer
	for {
		err := f()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if !silent(err) {
			since = time.Time{}
		} else {
			if since.IsZero() {
				since = time.Now()
			}
			quiet := time.Since(since)
			if quiet >= lost {
				return fmt.Errorf("%w: no answer for %.0f s (it may have stopped): %w", ErrLost, quiet.Seconds(), err)
			}
			if c.status != nil {
				c.status(Status{Unreachable: true, SilentSec: quiet.Seconds(), GivesUpInSec: (lost - quiet).Seconds()})
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Enroll enrols this browser with a one-time enrolment code and returns
// its credential ("id.secret"), which the page keeps. With an authority
// pinned (Pin) it then has the device's identity key (Identity, drawn
// afresh here) certified for the client ID the aggregator gave it (Certify);
// when only that fails, it returns the credential with an error
// wrapping ErrNotCertified.
func (c *Client) Enroll(ctx context.Context, code string) (string, error) {
	if code == "" {
		return "", errors.New("webclient: no enrolment code")
	}
	if c.trust != nil { // a new enrolment, a new identity
		var err error
		if c.ident, err = NewIdentity(); err != nil {
			return "", err
		}
		c.cert = nil
	}
	var b [24]byte
	crand.Read(b[:])
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	var resp enrollResponse
	err := c.retry(ctx, func() error {
		return c.call(ctx, "Enroll", &enrollRequest{Code: code, Secrets: []string{secret}}, &resp)
	})
	if err != nil {
		return "", err
	}
	if len(resp.Credentials) != 1 {
		return "", fmt.Errorf("webclient: enrol: %d credentials for one client", len(resp.Credentials))
	}
	c.cred = resp.Credentials[0].Token
	if c.trust != nil {
		if err := c.Certify(ctx, code); err != nil {
			return c.cred, fmt.Errorf("%w: %w", ErrNotCertified, err)
		}
	}
	return c.cred, nil
}

// ErrNotCertified is the error of an Enroll that enrolled the page with
// the aggregator (its credential is returned with the error) and did not
// get its identity certified by the pinned authority: the page keeps
// the credential and calls Certify again before it can take part.
var ErrNotCertified = errors.New("webclient: enrolled, and the identity is not certified")

// Dataset returns the person's ratings as a one-user dataset over the
// catalog, on dp-als's internal 1..5 scale (method.Internal), mapped as
// method.Fit maps a dataset on another scale.
func (c *Client) dataset(rs []Rating) (*ratings.Dataset, error) {
	ni := len(c.plan.Catalog.ItemIDs)
	d := &ratings.Dataset{Name: "browser", Scale: ratings.Scale{Min: 1, Max: 5, Step: 1}, UserIDs: []string{"me"},
		ItemIDs: c.plan.Catalog.ItemIDs}
	seen := map[int]bool{}
	rs = slices.Clone(rs)
	sort.Slice(rs, func(a, b int) bool { return rs[a].Item < rs[b].Item })
	for _, r := range rs {
		switch {
		case r.Item < 0 || r.Item >= ni:
			return nil, fmt.Errorf("webclient: a rating of item %d, outside the catalog of %d", r.Item, ni)
		case seen[r.Item]:
			return nil, fmt.Errorf("webclient: item %d rated twice", r.Item)
		case !c.scale.Contains(r.Value):
			return nil, fmt.Errorf("webclient: a rating of %g, outside the scale %v", r.Value, c.scale)
		}
		seen[r.Item] = true
		d.Users = append(d.Users, 0)
		d.Items = append(d.Items, int32(r.Item))
		d.Values = append(d.Values, c.toInternal(r.Value))
	}
	return d, nil
}

func (c *Client) toInternal(v float32) float32 {
	if c.scale.Min == 1 && c.scale.Max == 5 {
		return v
	}
	return float32(1 + (float64(v)-float64(c.scale.Min))*4/float64(c.scale.Max-c.scale.Min))
}

func (c *Client) fromInternal(v float32) float32 {
	if c.scale.Min == 1 && c.scale.Max == 5 {
		return v
	}
	return float32(float64(c.scale.Min) + (float64(v)-1)*float64(c.scale.Max-c.scale.Min)/4)
}

// Result is what a finished run gives the person.
type Result struct {
	// Recs are the best items for the person, best first, with the
	// predicted rating on the run's scale where the run trained a rating
	// model.
	Recs []Rec `json:"recs"`
	// Method is the run's method; Ranking is true when its model ranks
	// items and predicts no rating (dp-ease).
	Method  string `json:"method"`
	Ranking bool   `json:"ranking"`
	// Popular is true when the run's release carried no personalisation
	// (dp-ease with every item-item weight 0, model.Model.Personalised):
	// the list is DP popularity, the same for everyone, and the page says
	// so.
	Popular bool `json:"popular"`
	// EpsTotal and Delta are the run's (ε, δ) by the published model's
	// privacy report; Claim its words.
	EpsTotal float64 `json:"epsTotal"`
	Delta    float64 `json:"delta"`
	Claim    string  `json:"claim"`
	Unit     string  `json:"unit"`
	Trusted  string  `json:"trusted"`
	// Release, when not nil, is the interim release the list is from:
	// the page left a cohort run once its participation limits let it
	// answer no later round (the model's release block: the last round
	// it reads, and how many users); nil for the run's final model.
	Release *model.Release `json:"release,omitempty"`
	// Trained are the training rounds of the run this page answered, in
	// a run with cohorts or participation limits.
	Trained []int `json:"trained,omitempty"`
}

// Rec is a recommended item.
type Rec struct {
	Item  int    `json:"item"`
	Title string `json:"title"`
	// Score is the model's raw score, by which the list is ranked.
	Score float32 `json:"score"`
	// Rating is the rating a rating model (dp-als) predicts, on the run's
	// scale; nil for a ranking model (dp-ease), whose scores are not
	// ratings.
	Rating *float32 `json:"rating,omitempty"`
}

// Train answers every round of the run with the person's ratings until
// the run is done, then computes the person's recommendations on the
// device. In a cohort run it answers only the rounds whose cohorts its
// limits let it join and that took it, and returns as soon as its limits
// let it answer no later round, with the list from the newest release
// (Result.Release). onRound, when not nil, is called after every round;
// onStatus, when not nil, after every answer of the server while
// waiting, and while the server does not answer. Train fails with ErrLost when the
// server has not answered for LostAfter.
func (c *Client) Train(ctx context.Context, rs []Rating, n int, onRound func(Event), onStatus func(Status)) (*Result, error) {
	if c.cred == "" {
		return nil, errors.New("webclient: not enrolled")
	}
	if c.mem == nil {
		return nil, errors.New("webclient: no memory of the rounds answered (Remember): the page answers no round it cannot remember")
	}
	d, err := c.dataset(rs)
	if err != nil {
		return nil, err
	}
	me, cls, err := c.person(d)
	if err != nil {
		return nil, err
	}
	c.status = onStatus
	defer func() { c.status = nil }()
	c.sawFinal = false // cls is this call's: it saw no final round yet
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last, boot, session := c.last, c.boot, c.session
		var resp getRoundResponse
		err := c.retry(ctx, func() error {
			return c.call(ctx, "GetRound", &getRoundRequest{After: last, Boot: boot, Session: session}, &resp)
		})
		if err != nil {
			return nil, err
		}
		if onStatus != nil {
			onStatus(Status{State: strings.ToLower(strings.TrimPrefix(resp.State, "RUN_STATE_")),
				Enrolled: int(resp.Enrolled), MinClients: int(resp.MinClients)})
		}
		if resp.State == "RUN_STATE_DONE" {
			return c.finish(ctx, cls, d, n, false)
		}
		if c.leaves(&resp) {
			// Spent: the newest release, as privrec client --ratings
			// leaves a cohort run.
			return c.finish(ctx, cls, d, n, true)
		}
		if g := resp.Gathering; g != nil && resp.Broadcast == nil && g.Round > last {
			got, err := c.joinCohort(ctx, last, g)
			if err != nil {
				return nil, err
			}
			if got == nil {
				// Not in the round's cohort (the limits refuse it, or it
				// was not taken): the round goes on without the page.
				c.last, c.boot, c.session = g.Round, resp.Boot, ""
				continue
			}
			if resp = *got; resp.State == "RUN_STATE_DONE" {
				return c.finish(ctx, cls, d, n, false)
			}
		}
		w := resp.Broadcast
		if w == nil {
			continue
		}
		if w.Round < last || (w.Round == last && (resp.SecAgg == nil || resp.SecAgg.Session == session)) {
			// Answered already, here or before a reload: wait for a
			// later round of this server (its boot and session, so
			// that the next poll waits rather than returns at once).
			c.boot = resp.Boot
			if resp.SecAgg != nil {
				c.session = resp.SecAgg.Session
			}
			continue
		}
		began := time.Now()
		b, err := fromWire(w)
		if err != nil {
			return nil, fmt.Errorf("webclient: broadcast of round %d: %w", w.Round, err)
		}
		if err := c.checkBroadcast(b); err != nil {
			return nil, err
		}
		if !c.takes(b) {
			// Not in the round's cohort, or over the limits, whatever
			// the server's plan names: nothing of the round leaves.
			c.logf("round %d (%s): sitting it out (not taken into its cohort, or over the plan's limits)", b.Round, b.Phase)
			c.sitOut(b.Round, c.allowed(b.Round, b.Phase))
			c.last, c.boot, c.session = w.Round, resp.Boot, ""
			if resp.SecAgg != nil {
				c.session = resp.SecAgg.Session
			}
			continue
		}
		ev := Event{Round: b.Round, Phase: b.Phase, Masked: resp.SecAgg != nil, Words: b.Words, EpsSoFar: float64(resp.EpsTotal)}
		var compute time.Duration
		if resp.SecAgg != nil {
			ev.Clients = len(resp.SecAgg.Order)
			compute, err = c.masked(ctx, b, resp.SecAgg, me, w.Round == last)
		} else {
			compute, err = c.plain(ctx, b, me)
		}
		c.last, c.boot = w.Round, resp.Boot
		if resp.SecAgg != nil {
			c.session = resp.SecAgg.Session
		} else {
			c.session = ""
		}
		if err != nil {
			if errors.Is(err, errRefused) || errors.Is(err, secagg.ErrIdentity) || ctx.Err() != nil {
				return nil, err
			}
			ev.Err = err.Error() // dropped out of the round, as a device would
			c.logf("round %d: dropped out: %v", b.Round, err)
		}
		ev.TookMS = float64(time.Since(began).Microseconds()) / 1e3
		ev.ComputeMS = float64(compute.Microseconds()) / 1e3
		ev.Sent = c.sent
		if onRound != nil {
			onRound(ev)
		}
	}
}

// person returns the person's client of the run's method over d (nil
// without ratings) and, for dp-als, its clients (whose Finish solves the
// person's vector).
func (c *Client) person(d *ratings.Dataset) (protocol.Client, *dpals.Clients, error) {
	var list []protocol.Client
	var cls *dpals.Clients
	if c.ease != nil {
		ecl, err := dpease.NewClients(d, *c.ease)
		if err != nil {
			return nil, nil, err
		}
		list = ecl.List
	} else {
		var err error
		if cls, err = dpals.NewClients(d, c.cfg); err != nil {
			return nil, nil, err
		}
		list = cls.List
	}
	if len(list) == 1 {
		return list[0], cls, nil
	}
	return nil, cls, nil
}

// errRefused marks a round the client refuses to answer.
var errRefused = errors.New("webclient: refused")

// answer runs the person's client (dp-als's or dp-ease's) on b; a person without ratings
// answers with nothing (zeros in a masked round).
func answer(me protocol.Client, b *protocol.Broadcast) (*protocol.Upload, error) {
	if me == nil {
		return nil, nil
	}
	var seed [32]byte
	crand.Read(seed[:])
	return me.Round(b, rand.New(rand.NewChaCha8(seed)))
}

// plain answers a round without secure aggregation: only with an empty
// upload (dp-als's final round, where the device solves its vector).
func (c *Client) plain(ctx context.Context, b *protocol.Broadcast, me protocol.Client) (time.Duration, error) {
	t0 := time.Now()
	up, err := answer(me, b)
	if err != nil {
		return 0, err
	}
	if up != nil {
		return 0, fmt.Errorf("%w: round %d asks for a plain upload of the person's statistics; the page sends them only masked", errRefused, b.Round)
	}
	took := time.Since(t0)
	if b.Phase == protocol.PhaseFinal {
		c.sawFinal = true // the person's client solved its vector (dp-als)
	}
	if err := c.remember(ctx, int32(b.Round), b.Phase); err != nil {
		return took, err
	}
	err = c.retry(ctx, func() error {
		err := c.call(ctx, "Upload", &uploadRequest{Round: int32(b.Round)}, nil)
		var ce *CodeError
		if errors.As(err, &ce) && (ce.Code == "already_exists" || ce.Code == "failed_precondition") {
			return nil
		}
		return err
	})
	if err == nil {
		c.sent.EmptyUploads++
	}
	return took, err
}

// id returns the client ID of the credential.
func (c *Client) id() (uint32, error) {
	s, _, ok := strings.Cut(c.cred, ".")
	var id uint32
	if _, err := fmt.Sscan(s, &id); !ok || err != nil {
		return 0, errors.New("webclient: a malformed credential")
	}
	return id, nil
}

// fromWire converts a broadcast, as deploy's fromWireBroadcast does.
func fromWire(w *broadcast) (*protocol.Broadcast, error) {
	f32 := func(xs []jfloat) []float32 {
		if len(xs) == 0 {
			return nil
		}
		out := make([]float32, len(xs))
		for i, x := range xs {
			out[i] = float32(x)
		}
		return out
	}
	b := &protocol.Broadcast{
		Round: int(w.Round), Phase: w.Phase, Dim: int(w.Dim), NumItems: int(w.NumItems),
		Items: nilIfEmpty(w.Items), V: f32(w.V), Counts: nilIfEmpty(w.Counts), Aux: f32(w.Aux), AuxDim: int(w.AuxDim),
		Params: make(map[string]float64, len(w.Params)), Words: int(w.Words), Bits: int(w.Bits),
	}
	for k, v := range w.Params {
		b.Params[k] = float64(v)
	}
	return b, b.Validate()
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// finish fetches the published item factors (with interim, the newest
// release: the latest interim model while the run goes on, else the
// final one) and computes the person's recommendations on the device:
// dp-ease's score of the person's history against the published
// item-item weights (model.Model.FoldInRanking, as privrec recommend
// --model --ratings does), or dp-als's final solve of their bias and
// vector (done in the final round; against the release, by
// model.Model.FoldIn, when this Train saw no final round), scored over
// the catalog.
func (c *Client) finish(ctx context.Context, cls *dpals.Clients, d *ratings.Dataset, n int, interim bool) (*Result, error) {
	var resp getModelResponse
	if err := c.retry(ctx, func() error { return c.call(ctx, "GetModel", &getModelRequest{Interim: interim}, &resp) }); err != nil {
		return nil, err
	}
	pub, err := model.ReadModel(bytes.NewReader(resp.Model))
	if err != nil {
		return nil, fmt.Errorf("webclient: the published model: %w", err)
	}
	res := &Result{EpsTotal: pub.Privacy.EpsTotal, Delta: pub.Privacy.Delta, Claim: pub.Privacy.Note,
		Unit: pub.Privacy.Unit, Trusted: pub.Privacy.Trusted, Method: c.plan.Method, Ranking: c.ease != nil,
		Release: pub.Release, Trained: slices.Clone(c.trained)}
	if pub.Release != nil {
		c.logf("your list is from the release after round %d, which covers %d users: this page has answered every round its participation limits allow, and the run goes on",
			pub.Release.Round, pub.Release.Users)
	}
	if d.Len() == 0 {
		return res, nil
	}
	var m *model.Model
	internal := c.ease == nil // dp-als's own solve scores on the internal 1..5 scale
	if c.ease != nil {
		if !pub.Ranking || pub.UserItems == nil {
			return nil, errors.New("webclient: the published dp-ease model does not say which items a person's history indicates")
		}
		m, err = pub.FoldInRanking("me", d.Items)
		res.Popular = !pub.Personalised()
	} else if c.sawFinal {
		m, _, err = cls.Finish(pub.V)
	} else {
		// The page left before the final round (a cohort run, spent;
		// or it answered the final round before a reload): its bias and
		// vector are solved against the release as its final round
		// would have (model.Model.FoldIn, as privrec recommend --model
		// does). The published model is on the catalog's scale (the
		// server maps its biases there, model.Model.Affine), and so are
		// the ratings it is given and the scores it makes: the ridge is
		// linear, so they are the internal solve's, mapped.
		values := make([]float32, len(d.Values))
		for k, v := range d.Values {
			values[k] = c.fromInternal(v)
		}
		m, err = pub.FoldIn("me", d.Items, values, 0)
		internal = false
	}
	if err != nil {
		return nil, err
	}
	rated := slices.Clone(d.Items)
	for _, s := range m.Recommend(0, n, rated) {
		if math.IsNaN(float64(s.Score)) {
			continue
		}
		r := Rec{Item: int(s.Item), Score: float32(s.Score)}
		if c.ease == nil {
			if internal {
				r.Score = c.fromInternal(r.Score)
			}
			v := c.scale.Clamp(r.Score)
			r.Rating = &v
		}
		if int(s.Item) < len(c.plan.Catalog.Titles) {
			r.Title = c.plan.Catalog.Titles[s.Item]
		}
		res.Recs = append(res.Recs, r)
	}
	return res, nil
}
