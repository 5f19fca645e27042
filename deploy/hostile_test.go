package deploy

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/privrec/privrec/eval"
	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// hostileRun runs hdpmf with 30% of the clients dropping out of every
// round and one more enrolled client; with attack, that client sends
// every kind of bad upload each round before an empty valid answer and a
// duplicate of it. It returns the gathered model and the server's ledger.
func hostileRun(t *testing.T, d *ratings.Dataset, train *ratings.Dataset, attack bool) (*model.Model, []LedgerEntry, map[string]connect.Code) {
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "4"})
	const seed = 11
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: seed, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), MinClients: train.NumUsers() + 1, RoundTimeout: 3 * time.Second, MinParticipants: 0.5, MaxUploadBytes: 1 << 20},
		"127.0.0.1:0")
	hc, api, cred, _ := enrolAttacker(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	codes := map[string]connect.Code{}
	var wg sync.WaitGroup
	if attack {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attackRounds(ctx, t, hc, h.url, api, cred, codes)
		}()
	}
	sess := h.dial(t, true, seed)
	sess.cfg.Dropout = 0.3
	m, _ := runClients(t, sess, train, seed)
	cancel()
	wg.Wait()
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return m, led, codes
}

// attackRounds sends the bad uploads of every round until ctx ends, and
// records the error code each kind got.
func attackRounds(ctx context.Context, t *testing.T, hc *http.Client, url string, api federationv1connect.FederationServiceClient, cred string, codes map[string]connect.Code) {
	last := -1
	for ctx.Err() == nil {
		r, err := api.GetRound(ctx, withCred(&fedv1.GetRoundRequest{After: int32(last), Boot: ""}, cred))
		if err != nil {
			return
		}
		b := r.Msg.GetBroadcast()
		if r.Msg.GetState() == fedv1.RunState_RUN_STATE_DONE {
			return
		}
		if b == nil || int(b.GetRound()) <= last {
			continue
		}
		last = int(b.GetRound())
		round, dim, n := b.GetRound(), int(b.GetDim()), b.GetNumItems()
		if b.GetPhase() == "final" {
			continue // nothing to attack: uploads are refused anyway
		}
		vals := func(items int) []float32 {
			if b.GetPhase() == "setup" {
				return nil
			}
			return make([]float32, items*dim)
		}
		sparse := func(items []int32, values []float32, counts []int32) *fedv1.UploadRequest {
			return &fedv1.UploadRequest{Round: round, Meta: &fedv1.UploadMeta{Seeded: true},
				Payload: &fedv1.UploadRequest_Sparse{Sparse: &fedv1.SparseUpload{Items: items, Values: values, Counts: counts}}}
		}
		nan := vals(1)
		huge := vals(1)
		if nan != nil {
			nan[0], huge[0] = float32(math.NaN()), 1e30
		}
		kinds := []struct {
			name string
			req  *fedv1.UploadRequest
			cred string
		}{
			{"wrong-credential", sparse([]int32{0}, vals(1), []int32{1}), strings.Split(cred, ".")[0] + ".forged"},
			{"other-client", sparse([]int32{0}, vals(1), []int32{1}), "3.forged"},
			{"late", &fedv1.UploadRequest{Round: round - 1}, cred},
			{"early", &fedv1.UploadRequest{Round: round + 1}, cred},
			{"item-out-of-range", sparse([]int32{n}, vals(1), []int32{1}), cred},
			{"negative-item", sparse([]int32{-1}, vals(1), []int32{1}), cred},
			{"wrong-length", sparse([]int32{0, 1}, make([]float32, 3), []int32{1, 1}), cred},
			{"duplicate-item", sparse([]int32{2, 2}, vals(2), []int32{1, 1}), cred},
			{"inflated-count", sparse([]int32{0}, vals(1), []int32{1000}), cred},
			{"oversized", sparse(make([]int32, 1<<21), nil, nil), cred},
			{"masked", &fedv1.UploadRequest{Round: round, Payload: &fedv1.UploadRequest_Masked{Masked: &fedv1.MaskedUpload{ModulusBits: 32}}}, cred},
		}
		if nan != nil {
			kinds = append(kinds, struct {
				name string
				req  *fedv1.UploadRequest
				cred string
			}{"nan", sparse([]int32{0}, nan, []int32{1}), cred}, struct {
				name string
				req  *fedv1.UploadRequest
				cred string
			}{"out-of-range", sparse([]int32{0}, huge, []int32{1}), cred})
		}
		for _, k := range kinds {
			_, err := api.Upload(ctx, withCred(k.req, k.cred))
			if err == nil {
				t.Errorf("round %d: %s upload accepted", round, k.name)
				continue
			}
			codes[k.name] = connect.CodeOf(err)
		}
		// A valid empty answer, then the same again.
		if _, err := api.Upload(ctx, withCred(&fedv1.UploadRequest{Round: round, Meta: &fedv1.UploadMeta{Seeded: true}}, cred)); err != nil {
			if ctx.Err() == nil && connect.CodeOf(err) != connect.CodeFailedPrecondition {
				t.Errorf("round %d: valid empty upload: %v", round, err)
			}
			continue
		}
		_, err = api.Upload(ctx, withCred(&fedv1.UploadRequest{Round: round, Meta: &fedv1.UploadMeta{Seeded: true}}, cred))
		codes["duplicate"] = connect.CodeOf(err)
	}
}

// TestHostileClientsAndDropouts: every bad upload kind is refused with
// its code and leaves V bit-identical to the same run without the
// attacker, with 30% of the clients dropping out of every round; the run
// completes with an accuracy close to the run without dropouts.
func TestHostileClientsAndDropouts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two runs with hostile clients and dropouts (40 s); go test without -short runs it")
	}
	t.Parallel() // mostly waiting on deadlines
	d, spl := testData(t, 60)
	clean, ledA, _ := hostileRun(t, d, spl.Train, false)
	attacked, ledB, codes := hostileRun(t, d, spl.Train, true)
	if k := firstDiff(attacked.V, clean.V); k >= 0 {
		t.Fatalf("V[%d] = %v under attack, %v without", k, attacked.V[k], clean.V[k])
	}
	want := map[string]connect.Code{
		"wrong-credential": connect.CodeUnauthenticated, "other-client": connect.CodeUnauthenticated,
		"late": connect.CodeFailedPrecondition, "early": connect.CodeUnavailable,
		"item-out-of-range": connect.CodeInvalidArgument, "negative-item": connect.CodeInvalidArgument,
		"wrong-length": connect.CodeInvalidArgument, "duplicate-item": connect.CodeInvalidArgument,
		"inflated-count": connect.CodeInvalidArgument, "oversized": connect.CodeResourceExhausted,
		"masked": connect.CodeUnimplemented, "nan": connect.CodeInvalidArgument,
		"out-of-range": connect.CodeInvalidArgument, "duplicate": connect.CodeAlreadyExists,
	}
	for k, c := range want {
		if got, ok := codes[k]; !ok || got != c {
			t.Errorf("%s: code %v (sent: %v), want %v", k, got, ok, c)
		}
	}
	var rejected int
	for k, e := range ledB {
		for _, n := range e.Rejected {
			rejected += n
		}
		a := ledA[k]
		if e.Uploads != a.Uploads {
			t.Errorf("round %d: %d uploads folded under attack, %d without", k, e.Uploads, a.Uploads)
		}
		if e.Phase == "train" && float64(e.Participants) > 0.85*float64(e.Enrolled) {
			t.Errorf("round %d: %d of %d answered with 30%% dropping out", k, e.Participants, e.Enrolled)
		}
		// Dropouts weaken the noise: the ledger says by how much.
		if e.Phase == "train" && (e.Coverage >= 1 || e.Coverage <= 0 || (e.Eps >= 0 && e.Eps <= 1)) {
			t.Errorf("round %d: noise coverage %v, ε %v: want coverage below 1 and ε above the configured 1", k, e.Coverage, e.Eps)
		}
	}
	if rejected == 0 {
		t.Error("the ledger counts no refused upload")
	}
	// Accuracy: close to the in-process run without dropouts.
	spec, cfg := configure(t, "hdpmf", map[string]string{"epochs": "4"})
	full, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, 11, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ref := eval.Rating(attacked, spl.Test).RMSE, eval.Rating(full, spl.Test).RMSE
	if math.IsNaN(got) || math.Abs(got-ref) > 0.1 {
		t.Fatalf("test RMSE %.4f with 30%% dropouts, %.4f without", got, ref)
	}
	t.Logf("test RMSE %.4f with 30%% dropouts and an attacker, %.4f in process without dropouts", got, ref)
}

// enrolAttacker enrols one more client with the vendor token on h's
// server and returns an HTTP client and API that trust it, and the
// attacker's credential and the client ID the server assigned it.
func enrolAttacker(t *testing.T, h *harness) (*http.Client, federationv1connect.FederationServiceClient, string, uint32) {
	t.Helper()
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	api := federationv1connect.NewFederationServiceClient(hc, h.url)
	resp, err := api.Enroll(context.Background(), connect.NewRequest(&fedv1.EnrollRequest{Token: testToken}))
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Msg.GetCredentials()[0]
	return hc, api, c.GetToken(), c.GetClientId()
}
