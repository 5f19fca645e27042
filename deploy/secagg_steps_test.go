package deploy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
)

// TestNoStepOpensLate: the server opens the step a client sends next
// before any client hears the answer that lets it send, even when the
// server is slow to go on after releasing a step (a hook stalls it for
// a second after each). Before, a client's revealed shares arriving
// while the skipped consistency step of the passive protocol was still
// open were refused as early ("step 6 is not open yet"), the client
// dropped out, and the round waited out its deadline; here every round
// is released by every client with no refusal, and V equals the
// in-process run's bit for bit.
func TestNoStepOpensLate(t *testing.T) {
	d, spl := smallCatalog(t, 12, 100)
	spec, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir, addr := t.TempDir(), freeAddr(t)
	// A deadline no load misses: a step closes as soon as every client
	// sent, so only a refused message makes the run wait on it (and
	// then fail: without the reveals the sum cannot be unmasked).
	base := ServerConfig{Method: served("hdpmf"), Config: cfg, Seed: 3, TestMode: true, Catalog: catalogOf(d),
		StateDir: dir, RoundTimeout: 20 * time.Second}
	l := serveOn(t, base, addr, func(_ *liveServer, event string, _ int, _ []uint32) {
		if event == "answered step 4" { // the masked vectors' step
			time.Sleep(time.Second)
		}
	})
	hc, err := HTTPClient(dir + "/tls/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := Dial(ctx, ClientConfig{Methods: method.Protocol, URL: "https://" + addr, HTTP: hc, Token: testToken, Seeded: true, Seed: 3, Insecure: true,
		Logger: quietLog(), Retry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runClients(t, sess, spl.Train, 3)
	led, err := l.srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(led) == 0 {
		t.Fatal("no round in the ledger")
	}
	for _, e := range led {
		if n := e.Rejected["early"]; n > 0 || e.Participants != e.Enrolled || e.Skipped != "" {
			t.Errorf("round %d (%s): %d messages refused as early, %d of %d clients, skipped %q",
				e.Round, e.Phase, n, e.Participants, e.Enrolled, e.Skipped)
		}
	}
	if k := firstDiff(got.V, want.V); k >= 0 {
		t.Errorf("V[%d] = %v over the network, %v in process", k, got.V[k], want.V[k])
	}
}

// TestWarnPartiesSaysWhatItMeans: a party holding more than γ of a
// masked run's clients is warned about in words that say what it means
// and what to do (before: "one party holds more of the clients than
// secure aggregation's collusion bound" and nothing else).
func TestWarnPartiesSaysWhatItMeans(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2", "secagg": "masked"})
	dir := t.TempDir()
	codes, err := IssueCodes(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s, err := NewServer(ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: dir, Token: testToken,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var secrets []string
	for k := range 9 {
		secrets = append(secrets, fmt.Sprintf("vendor-secret-%04d", k))
	}
	if _, err := s.Enroll(ctx, connect.NewRequest(&fedv1.EnrollRequest{Token: testToken, Secrets: secrets})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enroll(ctx, connect.NewRequest(&fedv1.EnrollRequest{Code: codes[0], Secrets: []string{"device-secret-0001"}})); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.warnParties()
	s.mu.Unlock()
	for _, want := range []string{`party \"vendor\" holds 9 of the 10 clients`, "may collude with the server",
		"read what the one other client sent", "privrec enroll-codes"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the warning lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "code:") {
		t.Errorf("the device's party (1 of 10) is warned about:\n%s", log.String())
	}
}

// TestWordBytes: a masked vector's bytes on the wire are its words
// little-endian, whether or not they alias the vector's memory.
func TestWordBytes(t *testing.T) {
	for _, y := range [][]uint32{{}, {0}, {1, 0xdeadbeef, 0x01020304, ^uint32(0)}} {
		want := make([]byte, 4*len(y))
		for i, v := range y {
			binary.LittleEndian.PutUint32(want[4*i:], v)
		}
		if got := wordBytes(y); !bytes.Equal(got, want) {
			t.Errorf("wordBytes(%x) = %x, want %x", y, got, want)
		}
	}
}
