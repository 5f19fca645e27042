package deploy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
)

// hostileServer is a fake federation server on TLS loopback that serves a
// fixed script of broadcasts, one round after the other, accepts every
// upload and never finishes: the test drives a real Session against it.
type hostileServer struct {
	federationv1connect.UnimplementedFederationServiceHandler
	plan    *fedv1.HelloResponse
	script  []*fedv1.Broadcast
	mu      sync.Mutex
	served  int           // broadcasts handed out
	uploads map[int32]int // uploads taken, by round
}

func (h *hostileServer) Hello(context.Context, *connect.Request[fedv1.HelloRequest]) (*connect.Response[fedv1.HelloResponse], error) {
	return connect.NewResponse(h.plan), nil
}

func (h *hostileServer) Enroll(_ context.Context, req *connect.Request[fedv1.EnrollRequest]) (*connect.Response[fedv1.EnrollResponse], error) {
	resp := &fedv1.EnrollResponse{}
	for k, sec := range req.Msg.GetSecrets() {
		resp.Credentials = append(resp.Credentials, &fedv1.Credential{ClientId: uint32(k), Token: fmt.Sprintf("%d.%s", k, sec)})
	}
	return connect.NewResponse(resp), nil
}

func (h *hostileServer) GetRound(_ context.Context, req *connect.Request[fedv1.GetRoundRequest]) (*connect.Response[fedv1.GetRoundResponse], error) {
	for _, b := range h.script {
		if b.GetRound() > req.Msg.GetAfter() {
			h.mu.Lock()
			h.served++
			h.mu.Unlock()
			return connect.NewResponse(&fedv1.GetRoundResponse{State: fedv1.RunState_RUN_STATE_RUNNING, Broadcast: b, Boot: "hostile"}), nil
		}
	}
	// The script is over and the clients did not refuse it: say so
	// plainly rather than let them poll.
	return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("hostile server: end of script"))
}

func (h *hostileServer) Upload(_ context.Context, req *connect.Request[fedv1.UploadRequest]) (*connect.Response[fedv1.UploadResponse], error) {
	h.mu.Lock()
	if h.uploads == nil {
		h.uploads = map[int32]int{}
	}
	h.uploads[req.Msg.GetRound()]++
	h.mu.Unlock()
	return connect.NewResponse(&fedv1.UploadResponse{}), nil
}

// serveHostile serves h on 127.0.0.1 over dev TLS until the test ends and
// returns its URL and an HTTP client that trusts it.
func serveHostile(t *testing.T, h *hostileServer) (string, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	tc, err := ServerTLS("", "", true, dir)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(federationv1connect.NewFederationServiceHandler(h))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	hc, err := HTTPClient(filepath.Join(dir, "tls", "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + ln.Addr().String(), hc
}

// TestRedTeamHostileBroadcasts: a real Session with every client of a
// method, over TLS loopback, against a server that serves honest rounds
// and then a hostile one — a train broadcast without V, without counts,
// with counts of the wrong size, for a smaller catalog, with a NaN
// parameter, with masked words to clients that do not mask or 2^30 of
// them (which a client would allocate), a sampled round without V or
// positions, a wider latent dimension — returns an
// error naming a client (or the malformed broadcast) and the process
// does not panic (a panic in a worker goroutine would end the test
// binary). A client whose Round panics is recovered into an error
// naming it.
func TestRedTeamHostileBroadcasts(t *testing.T) {
	d, spl := smallCatalog(t, 6, 12)
	type attack struct {
		name   string
		method string
		params map[string]string
		// pick returns the index of the honest broadcast to spoil; those
		// before it are served honestly.
		pick  func(bs []*protocol.Broadcast) int
		spoil func(b *protocol.Broadcast)
		want  string // in the error
	}
	firstTrain := func(bs []*protocol.Broadcast) int {
		for k, b := range bs {
			if b.Phase == protocol.PhaseTrain && b.Param("fit", 0) == 0 {
				return k
			}
		}
		return len(bs) - 1
	}
	nth := func(n int) func([]*protocol.Broadcast) int { return func([]*protocol.Broadcast) int { return n } }
	hd := map[string]string{"epochs": "3"}
	attacks := []attack{
		{"hdpmf/no-V", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.V = nil }, "no V"},
		{"hdpmf/no-counts", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.Counts = nil }, "no counts"},
		{"hdpmf/short-counts", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.Counts = b.Counts[1:] }, "len(Counts)"},
		{"hdpmf/negative-counts", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.Counts[3] = -7 }, "Counts[3] = -7"},
		{"hdpmf/smaller-catalog", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) {
			b.NumItems--
			b.V, b.Counts = b.V[:b.NumItems*b.Dim], b.Counts[:b.NumItems]
		}, "the client expects"},
		{"hdpmf/nan-lr-user", "hdpmf", hd, nth(2), func(b *protocol.Broadcast) { b.Params["lr-user"] = math.NaN() }, `"lr-user" is NaN`},
		{"hdpmf/inf-V", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.V[5] = float32(math.Inf(1)) }, "V[5] is +Inf"},
		{"hdpmf/masked-words", "hdpmf", hd, nth(1), func(b *protocol.Broadcast) { b.Words, b.Bits = b.NumItems*(b.Dim+1), 32 }, "secagg=masked"},
		{"dpmf-mixture/no-aux", "dpmf", map[string]string{"epochs": "3", "noise": "mixture"}, nth(1),
			func(b *protocol.Broadcast) { b.Aux, b.AuxDim = nil, 0 }, "AuxDim 0"},
		{"ldp-op/no-V", "ldp-op", map[string]string{"epochs": "3", "per-round": "10"}, firstTrain,
			func(b *protocol.Broadcast) { b.V = nil }, "no V"},
		{"ldp-op/no-aux", "ldp-op", map[string]string{"epochs": "3", "per-round": "10"}, firstTrain,
			func(b *protocol.Broadcast) { b.Aux = nil }, "no Aux"},
		{"ldp-op/no-rows", "ldp-op", map[string]string{"epochs": "3", "per-round": "10"}, firstTrain,
			func(b *protocol.Broadcast) { b.Items, b.V, b.Aux = nil, make([]float32, b.NumItems*b.Dim), nil }, "names no rows"},
		{"sdmf/no-V", "sdmf", map[string]string{"epochs": "2"}, nth(0), func(b *protocol.Broadcast) { b.V = nil }, "no V"},
		{"sdmf/nan-eta", "sdmf", map[string]string{"epochs": "2"}, nth(0), func(b *protocol.Broadcast) { b.Params["eta"] = math.NaN() }, `"eta" is NaN`},
		{"sdmf/wider-dim", "sdmf", map[string]string{"epochs": "2"}, nth(0), func(b *protocol.Broadcast) {
			b.Dim++
			b.V = make([]float32, b.NumItems*b.Dim)
		}, "the client expects"},
		{"sdmf/huge-words", "sdmf", map[string]string{"epochs": "2"}, nth(0), func(b *protocol.Broadcast) { b.Words, b.Bits = 1<<30, 32 }, "asks for 1073741824 words"},
		{"ldp-op/fit-words", "ldp-op", map[string]string{"epochs": "3", "per-round": "10"}, nth(0),
			func(b *protocol.Broadcast) { b.Words, b.Bits = 1<<30, 32 }, "asks for 1073741824 words"},
		{"sd-fm/no-V", "sd-fm", map[string]string{"epochs": "2"}, nth(0), func(b *protocol.Broadcast) { b.V = nil }, "no V"},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			spec, cfg := configure(t, a.method, a.params)
			bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
			k := a.pick(bs)
			bad := copyBroadcast(bs[k])
			a.spoil(bad)
			var script []*fedv1.Broadcast
			for _, b := range bs[:k] {
				script = append(script, toWireBroadcast(b))
			}
			script = append(script, toWireBroadcast(bad))
			err := runAgainst(t, spec.Name, spec.Text(cfg), script, func() []protocol.Client {
				cls, err := spec.NewClients(cfg, spl.Train, 1)
				if err != nil {
					t.Fatal(err)
				}
				return cls.List
			})
			if err == nil {
				t.Fatal("the clients answered a hostile broadcast")
			}
			if !strings.Contains(err.Error(), a.want) || !errors.Is(err, protocol.ErrMessage) {
				t.Fatalf("error %q, want one wrapping protocol.ErrMessage about %q", err, a.want)
			}
			if !strings.Contains(err.Error(), "deploy: client ") && !strings.Contains(err.Error(), fmt.Sprintf("broadcast of round %d", bad.Round)) {
				t.Fatalf("error %q names neither the client nor the broadcast", err)
			}
			t.Logf("refused: %v", err)
		})
	}
	t.Run("panicking-client", func(t *testing.T) {
		spec, cfg := configure(t, "sdmf", map[string]string{"epochs": "2"})
		bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
		err := runAgainst(t, spec.Name, spec.Text(cfg), []*fedv1.Broadcast{toWireBroadcast(bs[0])}, func() []protocol.Client {
			return []protocol.Client{panicker{id: 0}, panicker{id: 1, panics: true}, panicker{id: 2}}
		})
		if err == nil || !strings.Contains(err.Error(), "client 1 round 0") || !strings.Contains(err.Error(), "panic") {
			t.Fatalf("error %v, want client 1's panic", err)
		}
		t.Logf("recovered: %v", err)
	})
}

// runAgainst serves script from a hostile server and runs the clients
// clients() of method name (config text cfg) against it with a real Session;
// it returns Session.Run's error.
func runAgainst(t *testing.T, name string, cfg map[string]string, script []*fedv1.Broadcast, clients func() []protocol.Client) error {
	t.Helper()
	d, _ := smallCatalog(t, 6, 12)
	spec, typed := configure(t, name, cfg)
	h := &hostileServer{script: script, plan: &fedv1.HelloResponse{Method: name, Config: cfg,
		Aggregation: aggregationName(spec.Federated.Aggregation(typed)),
		Catalog:     &fedv1.Catalog{ItemIds: d.ItemIDs},
		Scale:       &fedv1.Scale{Min: float64(d.Scale.Min), Max: float64(d.Scale.Max), Step: float64(d.Scale.Step)}}}
	url, hc := serveHostile(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: url, HTTP: hc, Token: "any", Logger: quietLog(), Retry: 10 * time.Second, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sess.Run(ctx, clients())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.served < len(script) {
		t.Fatalf("the session took %d of the script's %d broadcasts", h.served, len(script))
	}
	return err
}

// panicker is a client that panics in Round when told to.
type panicker struct {
	id     int
	panics bool
}

func (p panicker) ID() int { return p.id }

func (p panicker) Round(b *protocol.Broadcast, _ *rand.Rand) (*protocol.Upload, error) {
	if p.panics {
		var m map[string]int
		m["boom"]++ // nil map write: a runtime panic
	}
	return nil, nil
}

// TestRedTeamSecondSetup is issue 44's replayed setup: a server that
// sends a second setup phase later in the run (here as round 2, after a
// training round) would be answered again with the clients' setup
// answers (HDPMF's: the indicator of each client's rated items). The
// clients take part in one setup per run and refuse the second.
func TestRedTeamSecondSetup(t *testing.T) {
	d, spl := smallCatalog(t, 6, 12)
	spec, cfg := configure(t, "hdpmf", map[string]string{"epochs": "3"})
	bs, _, _ := honestBroadcasts(t, spec, cfg, d, spl.Train)
	if bs[0].Phase != protocol.PhaseSetup || bs[1].Phase != protocol.PhaseTrain {
		t.Fatalf("rounds 0 and 1 are %s and %s, want setup then train", bs[0].Phase, bs[1].Phase)
	}
	again := copyBroadcast(bs[0])
	again.Round = bs[1].Round + 1
	script := []*fedv1.Broadcast{toWireBroadcast(bs[0]), toWireBroadcast(bs[1]), toWireBroadcast(again)}
	err := runAgainst(t, spec.Name, spec.Text(cfg), script, func() []protocol.Client {
		cls, err := spec.NewClients(cfg, spl.Train, 1)
		if err != nil {
			t.Fatal(err)
		}
		return cls.List
	})
	if err == nil || !errors.Is(err, protocol.ErrMessage) || !strings.Contains(err.Error(), "second setup") {
		t.Fatalf("error %v, want the second setup refused", err)
	}
	t.Logf("refused: %v", err)
}
