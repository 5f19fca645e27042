package deploy

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/protocol"
)

// TestContinualRelease: a masked dp-als run over cohorts publishes an
// interim model after every released training round, each saying which
// round it reads and how many users; the count is the clients' own (the
// distinct clients that answered a training round, by their memory), it
// never falls, and each release's ε is the ledger's at its round. While
// the run goes on, GetModel gives the latest release when asked for
// interim ones and nothing otherwise; a restarted server gives the same
// release again.
func TestContinualRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, part := cohortConfig(t, "2", "20", "3", "2")
	type release struct {
		round int
		raw   []byte
	}
	var (
		mu       sync.Mutex
		releases []release
	)
	dir := t.TempDir()
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: dir, RoundTimeout: 20 * time.Second,
		OnRelease: func(round int, raw []byte) error {
			mu.Lock()
			defer mu.Unlock()
			releases = append(releases, release{round, raw})
			return nil
		}}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sess *Session
	var asked, unavailable int
	sess = dialCohort(t, ctx, h, "", func(p Progress) {
		// The session's own goroutine, after it enrolled: ask as a
		// device would, with the first client's credential.
		mu.Lock()
		var last release
		if len(releases) > 0 {
			last = releases[len(releases)-1]
		}
		mu.Unlock()
		if last.raw == nil {
			return
		}
		resp, err := sess.api.GetModel(ctx, withCred(&fedv1.GetModelRequest{Interim: true}, sess.creds[0]))
		if err != nil {
			t.Errorf("round %d: GetModel(interim): %v", p.Round, err)
			return
		}
		// The latest release may have moved on since last was read, and
		// in the final round the final model (no release block) may be
		// published already.
		r, err := model.ReadModel(bytes.NewReader(resp.Msg.GetModel()))
		switch {
		case err != nil:
			t.Errorf("round %d: GetModel(interim): %v", p.Round, err)
		case r.Release == nil && p.Phase == protocol.PhaseFinal: // the final model
		case r.Release == nil || r.Release.Round < last.round:
			t.Errorf("round %d: GetModel(interim) = release %+v; want an interim release of round ≥ %d", p.Round, r.Release, last.round)
		}
		asked++
		if _, err := sess.api.GetModel(ctx, withCred(&fedv1.GetModelRequest{}, sess.creds[0])); connect.CodeOf(err) == connect.CodeUnavailable {
			unavailable++
		} else if p.Phase != protocol.PhaseFinal {
			t.Errorf("round %d: GetModel without interim = %v, want Unavailable while the run goes on", p.Round, err)
		}
	})
	runClients(t, sess, spl.Train, 4)
	if asked == 0 || unavailable == 0 {
		t.Errorf("GetModel was asked for an interim release %d times, and refused the final one %d times: want both", asked, unavailable)
	}
	led, err := h.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	byRound := map[int]LedgerEntry{}
	for _, e := range led {
		byRound[e.Round] = e
	}
	mu.Lock()
	defer mu.Unlock()
	if len(releases) < 2 {
		t.Fatalf("%d interim releases, want one after each training round but the last", len(releases))
	}
	prev := 0
	for _, r := range releases {
		got, err := model.ReadModel(bytes.NewReader(r.raw))
		if err != nil {
			t.Fatal(err)
		}
		e := byRound[r.round]
		t.Logf("release of round %d: %d users, ε %.4g (ledger: %d users, ε %.4g)", r.round, got.Release.Users, got.Privacy.EpsTotal, e.Users, e.EpsTotal)
		switch {
		case got.Release == nil || got.Release.Round != r.round:
			t.Errorf("release of round %d says %+v", r.round, got.Release)
		case got.Release.Users != e.Users || got.Release.Users < prev || got.Release.Users == 0:
			t.Errorf("release of round %d reads %d users after %d; the ledger says %d", r.round, got.Release.Users, prev, e.Users)
		case got.Privacy.EpsTotal != e.EpsTotal || !(e.EpsTotal > 0):
			t.Errorf("release of round %d: ε %v, the ledger's %v", r.round, got.Privacy.EpsTotal, e.EpsTotal)
		}
		prev = got.Release.Users
	}
	final, err := model.ReadModel(bytes.NewReader(h.srv.Model()))
	if err != nil {
		t.Fatal(err)
	}
	took := 0
	for _, rounds := range sess.trained {
		if len(rounds) > 0 {
			took++
		}
	}
	// The final model carries no release block, so that readers from
	// before continual release read it; its users are the ledger's.
	if last := led[len(led)-1]; final.Release != nil || last.Users != took || took < prev {
		t.Errorf("final model's release %+v, the ledger's last users %d; %d clients answered a training round by their own record, the last interim release read %d",
			final.Release, last.Users, took, prev)
	}
	checkLimits(t, sess.trained, part)
}

// TestReleaseResumes: a server restarted mid-run gives, from its
// snapshot, the interim release it had published before it stopped, bit
// for bit, before any new round.
func TestReleaseResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, _ := cohortConfig(t, "2", "20", "3", "2")
	dir := t.TempDir()
	stop := errors.New("stopped after the first release")
	var first []byte
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: dir, RoundTimeout: 20 * time.Second,
		OnRelease: func(_ int, raw []byte) error {
			first = raw
			return stop // Run ends here, as a crash right after the commit would
		}}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := dialCohort(t, ctx, h, "", nil)
	spec, scfg := specOf(t, sess)
	cls, err := spec.NewClients(scfg, spl.Train, 4)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		_, err := sess.Run(runCtx, cls.List)
		ran <- err
	}()
	if err := <-h.done; !errors.Is(err, stop) {
		t.Fatalf("server stopped with %v, want the release hook's error", err)
	}
	stopRun()
	<-ran
	h.done <- nil // for the cleanup
	h.srv.Close()
	var again []byte
	srv, err := NewServer(ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: dir, Token: testToken, Logger: quietLog(), RoundTimeout: 20 * time.Second,
		OnRelease: func(_ int, raw []byte) error {
			again = raw
			return stop
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Run(ctx); !errors.Is(err, stop) {
		t.Fatalf("restarted Run = %v, want the release hook's error before any round", err)
	}
	if first == nil || !bytes.Equal(first, again) {
		t.Errorf("the restarted server released %d bytes, the first %d: want the same release", len(again), len(first))
	}
}

// TestDeviceLeavesWhenSpent: in a cohort run, a device whose
// participation limits let it answer no later round leaves with the
// newest release (ClientConfig.LeaveWhenSpent) while the run goes on: an
// interim model that reads the last round it answered. Run again later
// with the same memory, after the run ended, it answers nothing more and
// gets the final model.
func TestDeviceLeavesWhenSpent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a masked cohort run over TLS loopback; go test without -short runs it")
	}
	d, spl := smallCatalog(t, 60, 300)
	m, cfg, part := cohortConfig(t, "2", "20", "2", "1")
	h := startServer(t, ServerConfig{Method: m, Config: cfg, Seed: 4, TestMode: true, Catalog: catalogOf(d),
		StateDir: t.TempDir(), RoundTimeout: 20 * time.Second}, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	memory := t.TempDir()
	dial := func(workers int, leave bool, memory string) *Session {
		sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: h.url, HTTP: hc, Token: testToken, Seeded: true, Seed: 4,
			Insecure: true, Logger: quietLog(), Retry: 30 * time.Second, Workers: workers, LeaveWhenSpent: leave, Memory: memory})
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	// The device's one client and the vendor's 59; the vendor joins one
	// client at a time, so that the device is taken into cohorts.
	device, vendor := dial(0, true, memory), dial(1, false, "")
	spec, scfg := specOf(t, device)
	cls, err := spec.NewClients(scfg, spl.Train, 4)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		m   *model.Model
		err error
	}
	left := make(chan result, 1)
	go func() {
		got, err := device.Run(ctx, cls.List[59:])
		left <- result{got, err}
	}()
	ran := make(chan error, 1)
	go func() {
		_, err := vendor.Run(ctx, cls.List[:59])
		ran <- err
	}()
	var got result
	select {
	case got = <-left:
	case err := <-ran:
		t.Fatalf("the run ended (%v) before the device left", err)
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	trained := slices.Clone(device.trainedOf(0))
	if len(trained) != part.MaxRounds {
		t.Fatalf("the device answered training rounds %v and left: want %d (its limit)", trained, part.MaxRounds)
	}
	if r := got.m.Release; r == nil || r.Round < trained[len(trained)-1] || r.Users < 1 {
		t.Errorf("the device left with release %+v, having answered rounds %v: want an interim release that reads its last round", r, trained)
	} else {
		t.Logf("the device answered rounds %v and left with the release of round %d (%d users)", trained, r.Round, r.Users)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// The run is done: the same device again answers nothing and reads
	// the final model.
	again := dial(0, true, memory)
	final, err := again.Run(ctx, cls.List[59:])
	if err != nil {
		t.Fatal(err)
	}
	if final.Release != nil || !slices.Equal(again.trainedOf(0), trained) {
		t.Errorf("again: release %+v, rounds %v; want the final model, and rounds %v", final.Release, again.trainedOf(0), trained)
	}
}
