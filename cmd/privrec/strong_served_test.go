package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/privrec/privrec/dpease"
	"github.com/privrec/privrec/eval"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/ratings"
)

// TestServedStrongEqualsInProcess measures lists as new users see them:
// a masked dp-ease run served over loopback TLS in test mode, whose
// vendor client holds out a fifth of the users (client --simulate
// --protocol strong); after the run each held-out user folds in against
// the published model alone and is ranked. Their Recall and NDCG at 10
// and 20 equal evaluate --protocol strong's in process with the same
// method flags and seed, and the published model records the items a
// new user's indicator covers. At ε = 1 the roster is too small for the
// budget: in process dp-ease's roster rule (the training users) puts the
// run in popularity mode, and the served run must reach the same split
// from its enrolled count (protocol.RosterSetter), not the 0.1 default.
func TestServedStrongEqualsInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a served dp-ease run")
	}
	for _, eps := range []string{"5", "1"} {
		t.Run("eps="+eps, func(t *testing.T) { servedStrong(t, eps) })
	}
}

func servedStrong(t *testing.T, eps string) {
	const seed, frac = "3", 0.2
	data := syntheticTSV(t, 11)
	d, _, err := ratings.Load(data, ratings.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	train, _, _, err := eval.StrongSplit(d, frac, strongFoldFrac, 3)
	if err != nil {
		t.Fatal(err)
	}
	users := 0
	byUser := train.ByUser()
	for u := range byUser.Rows() {
		if byUser.RowLen(u) > 0 {
			users++
		}
	}
	methodArgs := []string{"--method", "dp-ease", "--secagg", "masked", "--seeded", "--eps", eps, "--top-items", "20"}
	cfg := dpease.DefaultConfig()
	cfg.Eps, cfg.Delta, cfg.TopItems, cfg.Roster = 1, 1e-6, 20, users
	if cfg.Eps, err = strconv.ParseFloat(eps, 64); err != nil {
		t.Fatal(err)
	}
	srv, err := dpease.NewServer(cfg, train.Public(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if pop := srv.PopularityMode(); pop != (eps == "1") {
		t.Fatalf("ε = %s, %d users: popularity mode %v; the case no longer tests what it says", eps, users, pop)
	}
	common := []string{"--seed", seed, "--scale", "1,5,1"}
	proto := "strong:" + fmt.Sprint(frac)

	want, _, err := run(t, append(append([]string{"evaluate", "--data", data, "--protocol", proto, "--json"}, methodArgs...), common...)...)
	if err != nil {
		t.Fatal(err)
	}

	state := filepath.Join(t.TempDir(), "state")
	prm := filepath.Join(t.TempDir(), "model.prm")
	addr := freeAddr(t)
	var wg sync.WaitGroup
	var serveErr, clientErr error
	var serveOut, got string
	wg.Go(func() {
		// The honest-but-curious protocol (--insecure on both sides): its
		// sums equal the in-process ones bit for bit.
		args := append([]string{"serve", "--secagg-active=false", "--insecure", "--dev-tls", "--state", state, "--listen", addr, "--items", data,
			"--min-clients", fmt.Sprint(users), "--enroll-quiet", "1s", "--round-timeout", "2m", "--linger", "2s", "--out", prm}, methodArgs...)
		var serveLog string
		serveOut, serveLog, serveErr = run(t, append(args, common...)...)
		t.Log(serveLog)
	})
	cert := devCert(t, state)
	wg.Go(func() {
		var clog string
		got, clog, clientErr = run(t, append([]string{"client", "--insecure", "--server", "https://" + addr, "--ca", cert,
			"--token-file", filepath.Join(state, "enroll-token"), "--simulate", "all", "--data", data,
			"--protocol", proto, "--json"}, common...)...)
		t.Log(clog)
	})
	wg.Wait()
	if serveErr != nil || clientErr != nil {
		t.Fatalf("serve: %v\n%s\nclient: %v", serveErr, serveOut, clientErr)
	}

	var w, g strongReport
	for _, x := range []struct {
		out string
		rep *strongReport
	}{{want, &w}, {got, &g}} {
		if err := json.Unmarshal([]byte(x.out), x.rep); err != nil {
			t.Fatalf("%v\n%s", err, x.out)
		}
	}
	if g.Users == 0 || g.Users != w.Users || g.Fold != w.Fold || g.Test != w.Test || g.Train != w.Train {
		t.Fatalf("served: %d users, %d fold-in, %d test, %d train ratings; in process %d, %d, %d, %d",
			g.Users, g.Fold, g.Test, g.Train, w.Users, w.Fold, w.Test, w.Train)
	}
	for _, k := range []string{"recall@10", "recall@20", "ndcg@10", "ndcg@20", "auc"} {
		if g.Metrics[k] != w.Metrics[k] {
			t.Errorf("%s: %v served, %v in process", k, g.Metrics[k], w.Metrics[k])
		}
	}
	if !(g.Metrics["recall@20"] > 0) {
		t.Errorf("served recall@20 %v: the held-out users found nothing relevant", g.Metrics["recall@20"])
	}
	pub, err := model.Load(prm)
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.UserItems) != 20 || pub.Dim != 21 || !pub.Ranking {
		t.Errorf("published model: %d user items, Dim %d, ranking %v; want 20, 21, true", len(pub.UserItems), pub.Dim, pub.Ranking)
	}
}
