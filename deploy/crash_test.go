package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/shard"
)

// childEnv names the environment variable that turns the test binary
// into a server process for TestKill9Resume.
const childEnv = "PRIVREC_DEPLOY_CHILD"

// childSpec is what the child server runs.
type childSpec struct {
	Method string            `json:"method"`
	Params map[string]string `json:"params"`
	Users  int               `json:"users"`
	Seed   uint64            `json:"seed"`
	State  string            `json:"state"`
	Addr   string            `json:"addr"`
	// NATS and Run, when set, aggregate masked rounds there in 2 shards.
	NATS string `json:"nats,omitempty"`
	Run  string `json:"run,omitempty"`
	// Front, when set, makes the child a front-end instead (TestFrontKill9).
	Front *frontSpec `json:"front,omitempty"`
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(childEnv); raw != "" {
		os.Exit(runChild(raw))
	}
	os.Exit(m.Run())
}

// runChild serves a run until killed.
func runChild(raw string) int {
	var c childSpec
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if c.Front != nil {
		return runFrontChild(c.Front)
	}
	t := &testing.T{}
	d, _ := testData(t, c.Users)
	_, cfg := configure(t, c.Method, c.Params)
	var sharded *Sharded
	if c.NATS != "" {
		nc, err := nats.Connect(c.NATS)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		sharded = &Sharded{Conn: nc, Config: shard.Config{Run: c.Run, Shards: 2}}
	}
	srv, err := NewServer(ServerConfig{Method: served(c.Method), Config: cfg, Seed: c.Seed, TestMode: true, Catalog: catalogOf(d),
		StateDir: c.State, Token: testToken, EnrollQuiet: 100 * time.Millisecond, Logger: quietLog(), Sharded: sharded})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	tc, err := ServerTLS("", "", true, c.State)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var ln net.Listener
	for try := 0; ; try++ { // the previous incarnation's port may linger
		if ln, err = net.Listen("tcp", c.Addr); err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, ln, tc, nil, 0); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// childStarter returns a function that starts the test binary again as
// the server of spec (TestMain reads it from childEnv).
func childStarter(t *testing.T, spec childSpec) func() *exec.Cmd {
	raw, _ := json.Marshal(spec)
	return func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
}

// childCert waits (at most 30 s) for the certificate a child server
// writes into its state directory and returns its path.
func childCert(t *testing.T, state string) string {
	t.Helper()
	ca := filepath.Join(state, "tls", "cert.pem")
	for k := 0; ; k++ {
		if _, err := os.Stat(ca); err == nil {
			return ca
		}
		if k == 600 {
			t.Fatal("the child server made no certificate")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runResult is the end of a run of clients: the item factors their
// model holds, or the error that stopped them.
type runResult struct {
	v   []float32
	err error
}

// runAsync runs the clients of train in session sess (within 3 minutes)
// and delivers the result on the channel it returns.
func runAsync(sess *Session, train *ratings.Dataset, seed uint64) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		served, cfg, err := sess.Method()
		if err != nil {
			done <- runResult{err: err}
			return
		}
		spec, err := method.Lookup(served.Name())
		if err != nil {
			done <- runResult{err: err}
			return
		}
		cls, err := spec.NewClients(cfg, train, seed)
		if err != nil {
			done <- runResult{err: err}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		pub, err := sess.Run(ctx, cls.List)
		if err != nil {
			done <- runResult{err: err}
			return
		}
		m, _, err := cls.Finish(pub.V)
		if err != nil {
			done <- runResult{err: err}
			return
		}
		done <- runResult{v: m.V}
	}()
	return done
}

// TestKill9Resume kills the server process at random moments of a run,
// with SIGKILL (and every third time with SIGTERM, the graceful shutdown
// that abandons the open round), and restarts it on the same state: the clients retry across
// the restarts, the run finishes, the final V equals the uninterrupted
// in-process run's bit for bit, and the ledger holds each round once.
// (The README's crash test does the same at 100 points with the privrec
// binary.)
func TestKill9Resume(t *testing.T) {
	const seed, users, kills = 5, 60, 6
	params := map[string]string{"epochs": "30"}
	_, spl := testData(t, users)
	spec, cfg := configure(t, "hdpmf", params)
	want, _, err := spec.Fit(method.WithTestMode(context.Background()), spl.Train, cfg, seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	spec2 := childSpec{Method: "hdpmf", Params: params, Users: users, Seed: seed, State: state, Addr: freeAddr(t)}
	start := childStarter(t, spec2)
	child := start()
	defer func() { child.Process.Kill(); child.Wait() }()
	h := &harness{url: "https://" + spec2.Addr, ca: childCert(t, state)}
	done := runAsync(h.dial(t, true, seed), spl.Train, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	var got runResult
	killed := 0
loop:
	for killed < kills {
		select {
		case got = <-done:
			break loop
		case <-time.After(time.Duration(100+r.IntN(500)) * time.Millisecond):
		}
		sig := syscall.SIGKILL
		if killed%3 == 2 {
			sig = syscall.SIGTERM
		}
		child.Process.Signal(sig)
		child.Wait()
		killed++
		child = start()
	}
	if got.v == nil && got.err == nil {
		got = <-done
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if killed < 2 {
		t.Fatalf("the run ended after %d kills; the test needs it to span several", killed)
	}
	if k := firstDiff(got.v, want.V); k >= 0 {
		t.Fatalf("after %d kills, V[%d] = %v, uninterrupted %v", killed, k, got.v[k], want.V[k])
	}
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	st, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	led, err := st.ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(led) != 32 { // setup, 30 training rounds, final
		t.Fatalf("the ledger holds %d rounds, want 32", len(led))
	}
	for k, e := range led {
		if e.Round != k || e.Participants != e.Enrolled {
			t.Fatalf("ledger entry %d: %+v", k, e)
		}
	}
	t.Logf("%d kills; V bit-identical; ledger: %d rounds, each once", killed, len(led))
}
