package deploy

import (
	"context"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
)

// TestCohortDropAfterShares: a masked cohort run over TLS whose simulated
// devices go offline after their encrypted shares (15% a training
// round), 20% of them enrolling only after round 2. Every training
// round is released, not skipped, with its cohort less the devices that
// left: the server reconstructed the leavers' pairwise masks from the
// survivors' shares, and the sums were in bounds (nothing refused). The
// ledger carries the server's CPU time and resident set at each fold,
// and the traffic is counted by device.
func TestCohortDropAfterShares(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, part := cohortConfig(t, "2", "20", "3", "2")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d), MinClients: 40,
		StateDir: t.TempDir(), RoundTimeout: 2 * time.Second, MinParticipants: 0.6}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	hc, traffic := CountTraffic(hc)
	pop := Population{DropAfterShares: 0.15, Late: 0.2, LateAfter: 2, LateUntil: 2}
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 4,
		Insecure: true, Logger: quietLog(), Retry: 30 * time.Second, Population: &pop})
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
	leftAll, train := 0, 0
	for _, e := range led {
		// The devices of the cohort that left after their shares, by
		// the population's draws.
		left, took := 0, 0
		for k, rounds := range sess.trained {
			if slices.Contains(rounds, e.Round) {
				took++
				if pop.DropsAfterShares(4, sess.pop.dev[k], e.Round) {
					left++
				}
			}
		}
		t.Logf("round %d (%s): cohort %d of %d enrolled, %d masked inputs, %d left after their shares, skipped %q, cpu %.2f s, rss %d MB",
			e.Round, e.Phase, e.Cohort, e.Enrolled, e.Uploads, left, e.Skipped, e.CPUSeconds, e.RSSBytes>>20)
		if runtime.GOOS == "linux" && (!(e.CPUSeconds > 0) || e.RSSBytes <= 0 || e.PeakRSSBytes <= 0) {
			t.Errorf("round %d: cpu %v s, rss %d, peak %d: want the server's usage measured", e.Round, e.CPUSeconds, e.RSSBytes, e.PeakRSSBytes)
		}
		if e.Phase != protocol.PhaseTrain {
			continue
		}
		train++
		leftAll += left
		if e.Skipped != "" || e.Refused != "" {
			t.Errorf("round %d: skipped %q, refused %q: want it released without the %d devices that left", e.Round, e.Skipped, e.Refused, left)
		}
		if took != part.Cohort || e.Uploads != took-left {
			t.Errorf("round %d: %d masked inputs of a cohort of %d (%d took part, %d left after their shares): want %d", e.Round, e.Uploads, e.Cohort, took, left, took-left)
		}
	}
	if train == 0 || leftAll == 0 {
		t.Errorf("%d training rounds, %d devices left after their shares: the test exercises nothing", train, leftAll)
	}
	if e := led[len(led)-1]; e.Enrolled != 60 {
		t.Errorf("the final round counts %d enrolled, want 60 (the late arrivals enrolled)", e.Enrolled)
	}
	late := 0
	for k, rounds := range sess.trained {
		if sess.pop.arrive[k] > 0 {
			if len(rounds) > 0 && rounds[0] < sess.pop.arrive[k] {
				t.Errorf("late client %d (arrives at round %d) answered round %d", k, sess.pop.arrive[k], rounds[0])
			}
			late += len(rounds)
		}
	}
	if late == 0 {
		t.Error("no late device took part in a cohort")
	}
	s := traffic.Summary()
	t.Logf("traffic: %d devices, sent %.0f B (median %.0f), received %.0f B (median %.0f); wire %d/%d B", s.Clients, s.SentMean, s.SentMedian, s.RecvMean, s.RecvMedian, s.WireSent, s.WireRecv)
	if s.Clients < part.Cohort || !(s.SentMedian > 0) || s.WireSent < s.SessionSent {
		t.Errorf("traffic %+v: want the bytes of every device that took part counted", s)
	}
}
