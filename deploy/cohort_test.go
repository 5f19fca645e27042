package deploy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
)

// limited is a registered method served with participation limits of
// its own (until a method's configuration carries them, the tests give
// them here): the server and the clients both resolve it.
type limited struct {
	protocol.Method
	part protocol.Participation
}

func (m limited) Participation(any) protocol.Participation { return m.part }

// methodsWith resolves every method as method.Protocol does, with m in
// place of its name.
func methodsWith(m protocol.Method) func(string) (protocol.Method, error) {
	return func(name string) (protocol.Method, error) {
		if name == m.Name() {
			return m, nil
		}
		return method.Protocol(name)
	}
}

// TestCohortRounds: a masked dp-als run over TLS in which every round
// takes a cohort of 20 of the 60 enrolled clients: each round's sum
// holds its cohort alone, and no client answers more training rounds
// than the plan's limit nor two closer than its gap.
func TestCohortRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	_, cfg := configure(t, "dp-als", map[string]string{"secagg": "masked", "bias-rounds": "2", "rounds": "2", "init-items": "10"})
	part := protocol.Participation{Cohort: 20, MaxRounds: 3, MinGap: 2}
	m := limited{served("dp-als"), part}
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 20 * time.Second}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess, err := Dial(ctx, ClientConfig{Methods: methodsWith(m), URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 4,
		Insecure: true, Logger: quietLog(), Retry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runClients(t, sess, spl.Train, 4)
	if rmse := eval.Rating(got, spl.Test).RMSE; math.IsNaN(rmse) || rmse > 2 {
		t.Errorf("test RMSE %v", rmse)
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	trainRounds := 0
	for _, e := range led {
		t.Logf("round %d (%s): cohort %d, %d answered, %d masked inputs, skipped %q", e.Round, e.Phase, e.Cohort, e.Participants, e.Uploads, e.Skipped)
		if e.Phase == protocol.PhaseFinal {
			continue
		}
		if e.Cohort != part.Cohort || e.Uploads != part.Cohort || e.Skipped != "" || e.Enrolled != 60 {
			t.Errorf("round %d: cohort %d, %d masked inputs of %d enrolled, skipped %q: want every round released from a cohort of %d",
				e.Round, e.Cohort, e.Uploads, e.Enrolled, e.Skipped, part.Cohort)
		}
		if e.Phase == protocol.PhaseTrain {
			trainRounds++
		}
	}
	// The clients' own record: the limits held, and together the
	// clients answered every training round's cohort.
	total := 0
	for k, rounds := range sess.trained {
		total += len(rounds)
		if len(rounds) > part.MaxRounds {
			t.Errorf("client %d answered %d training rounds %v, over the limit of %d", k, len(rounds), rounds, part.MaxRounds)
		}
		for i := 1; i < len(rounds); i++ {
			if rounds[i]-rounds[i-1] < part.MinGap {
				t.Errorf("client %d answered rounds %v, two closer than the gap of %d", k, rounds, part.MinGap)
			}
		}
	}
	if trainRounds == 0 || total != trainRounds*part.Cohort {
		t.Errorf("the clients answered %d training participations over %d training rounds, want %d", total, trainRounds, trainRounds*part.Cohort)
	}
}
