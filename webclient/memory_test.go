package webclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/webclient"
)

// TestMemoryAcrossReload: a page answers every masked round of a served
// dp-ease run, remembering each round (Store) before its answer leaves.
// A replay, a second server with the same plan, then asks a page
// restored with that memory (a reload of the same browser, enrolled
// anew with the replay's code): it answers no round of it. Before, the
// page kept its last round in memory only, and a reloaded page answered
// every round again, so the replay got a second masked vector of the
// same data; the control, the same page without its memory, still does.
func TestMemoryAcrossReload(t *testing.T) {
	if testing.Short() {
		t.Skip("served runs: skipped in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"}, Simulated: 8,
		RoundTimeout: 2 * time.Second}
	rs := []webclient.Rating{{Item: 3, Value: 5}, {Item: 40, Value: 4}, {Item: 77, Value: 2}}

	r1 := deploytest.NewServer(ctx, t, cfg)
	store := &memStore{}
	c, err := webclient.New(httpTransport{r1.URL}, hello(t, r1.URL))
	if err != nil {
		t.Fatal(err)
	}
	c.AllowInsecure()
	if err := c.Remember(nil, store); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enroll(ctx, r1.Code); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Train(ctx, rs, 10, nil, nil); err != nil {
		t.Fatal(err)
	}
	r1.Wait(t, time.Minute)
	if c.Sent().MaskedRounds != c.Rounds() || store.saves != c.Rounds() {
		t.Fatalf("%d masked vectors sent, %d saves of the memory, for a plan of %d rounds", c.Sent().MaskedRounds, store.saves, c.Rounds())
	}
	var mem webclient.Memory
	if err := json.Unmarshal(store.bytes(), &mem); err != nil || len(mem.Plans) != 1 {
		t.Fatalf("the memory saved: %s (%v)", store.bytes(), err)
	}
	for _, pm := range mem.Plans {
		if pm.Last != int32(c.Rounds()-1) || pm.Setup != 0 {
			t.Errorf("the memory says last %d, setup %d; want %d and 0", pm.Last, pm.Setup, c.Rounds()-1)
		}
	}

	for _, tc := range []struct {
		name    string
		memory  []byte
		answers bool
	}{
		{"restored", store.bytes(), false},
		{"without its memory (control)", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r2 := deploytest.NewServer(ctx, t, cfg) // the replay: the same plan
			c2, err := webclient.New(httpTransport{r2.URL}, hello(t, r2.URL))
			if err != nil {
				t.Fatal(err)
			}
			c2.AllowInsecure()
			if err := c2.Remember(tc.memory, &memStore{}); err != nil {
				t.Fatal(err)
			}
			cred, err := c2.Enroll(ctx, r2.Code)
			if err != nil {
				t.Fatal(err)
			}
			tctx, tcancel := context.WithTimeout(ctx, 8*time.Second)
			defer tcancel()
			_, err = c2.Train(tctx, rs, 10, nil, nil)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			answers, opened := 0, false
			for _, q := range r2.Requests() {
				isAnswer := strings.HasSuffix(q.Path, "/SecAgg") || strings.HasSuffix(q.Path, "/Upload")
				if q.Auth == "Bearer "+cred && isAnswer {
					answers++
				} else if isAnswer {
					opened = true // the replay's round 0 was open to the page
				}
			}
			if !opened {
				t.Fatal("the replay opened no round while the page waited")
			}
			if tc.answers != (answers > 0) {
				t.Errorf("the page sent the replay %d answers (SecAgg steps, uploads); want answers %v", answers, tc.answers)
			}
		})
	}
}

// TestPlanDigestAgrees: the page and the command-line client give a
// served run's plan the same name (protocol.PlanDigest), so one memory
// of answered rounds means one run to both.
func TestPlanDigestAgrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"},
		Simulated: 8, RoundTimeout: 2 * time.Second})
	c, err := webclient.New(httpTransport{r.URL}, hello(t, r.URL))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := deploy.Dial(ctx, deploy.ClientConfig{URL: r.URL, Methods: method.Protocol, Retry: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if c.PlanDigest() == "" || c.PlanDigest() != sess.PlanDigest() {
		t.Fatalf("the page names the plan %q, the command-line client %q", c.PlanDigest(), sess.PlanDigest())
	}
}

// TestRefusesHonestButCurious: with no enrolment authority pinned, the
// page takes part in no masked round of the honest-but-curious protocol
// unless the person allowed it (AllowInsecure, the address's
// insecure=1): it refuses round 0 before any of its data leaves, and the
// run's sums hold only the simulated clients. Before, the page always
// ran that protocol, which a lying server can break.
func TestRefusesHonestButCurious(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"},
		Simulated: 8, RoundTimeout: 2 * time.Second})
	c, err := webclient.New(httpTransport{r.URL}, hello(t, r.URL))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remember(nil, &memStore{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enroll(ctx, r.Code); err != nil {
		t.Fatal(err)
	}
	_, err = c.Train(ctx, []webclient.Rating{{Item: 3, Value: 5}}, 10, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "honest-but-curious") {
		t.Fatalf("Train = %v, want the honest-but-curious protocol refused", err)
	}
	if s := c.Sent(); s.MaskedRounds != 0 {
		t.Fatalf("%d masked vectors sent before the refusal", s.MaskedRounds)
	}
}
