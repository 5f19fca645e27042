package shard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The child process of TestSIGKILLAggregator: the test binary run again
// with PRIVREC_SHARD_CHILD="url run shard round pauseAt" runs one
// aggregator; with pauseAt > 0 it stops after folding that many pieces,
// says so and waits to be killed. With PRIVREC_SHARD_NATS it is a
// nats-server node of a test cluster (childNATS).
func TestMain(m *testing.M) {
	if spec := os.Getenv("PRIVREC_SHARD_CHILD"); spec != "" {
		os.Exit(childAggregator(spec))
	}
	if spec := os.Getenv("PRIVREC_SHARD_NATS"); spec != "" {
		os.Exit(childNATS(spec)) // a node of a test cluster (cluster_test.go)
	}
	os.Exit(m.Run())
}

func childAggregator(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 5 {
		fmt.Fprintln(os.Stderr, "bad PRIVREC_SHARD_CHILD", spec)
		return 2
	}
	s, _ := strconv.Atoi(f[2])
	round, _ := strconv.ParseUint(f[3], 10, 64)
	pause, _ := strconv.Atoi(f[4])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(f[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	js, _ := jetstream.New(nc)
	c, err := LoadConfig(ctx, js, f[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ag, err := NewAggregator(js, c, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if pause > 0 {
		ag.OnFold = func(n int) {
			if n == pause {
				fmt.Printf("FOLDED %d\n", n)
				select {} // wait for SIGKILL
			}
		}
	}
	st, err := ag.Round(ctx, round)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, _ := json.Marshal(st)
	fmt.Printf("STATS %s\n", b)
	return 0
}

// TestSIGKILLAggregator kills shard 1's aggregator process with SIGKILL
// after it folded 6 pieces (the 6th never checkpointed),
// starts a new process, and checks that the round completes with the
// single server's sum and that the new process resumed from the
// checkpoint and folded every admitted client.
func TestSIGKILLAggregator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	nc, js := startNATS(t)
	c := Config{Run: "sigkill", Shards: 2, Len: 300, Clients: 12, Bits: 24,
		AckWait: time.Second, CheckpointEvery: 4, MaxAckPending: 8}
	pr := newProblem(c.Clients, c.Len, 13)
	var killedAt string
	var final AggStats
	hooks := roundHooks{aggregators: func(ctx context.Context, t *testing.T, c Config, round uint64) func() []AggStats {
		ag0, err := NewAggregator(js, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		var st0 AggStats
		var err0, err1 error
		var wg sync.WaitGroup
		wg.Go(func() { st0, err0 = ag0.Round(ctx, round) })
		child := func(pause int) (*exec.Cmd, *bufio.Scanner, error) {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("PRIVREC_SHARD_CHILD=%s %s 1 %d %d", nc.ConnectedUrl(), c.Run, round, pause))
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				return nil, nil, err
			}
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			return cmd, bufio.NewScanner(out), nil
		}
		wg.Go(func() {
			cmd, sc, err := child(6)
			if err != nil {
				err1 = err
				return
			}
			if !sc.Scan() {
				err1 = fmt.Errorf("first aggregator ended before folding 6 pieces")
				_ = cmd.Wait()
				return
			}
			killedAt = sc.Text()
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				err1 = err
				return
			}
			_ = cmd.Wait()
			cmd, sc, err = child(0)
			if err != nil {
				err1 = err
				return
			}
			for sc.Scan() {
				if s, ok := strings.CutPrefix(sc.Text(), "STATS "); ok {
					err1 = json.Unmarshal([]byte(s), &final)
				}
			}
			if err := cmd.Wait(); err != nil {
				err1 = fmt.Errorf("restarted aggregator: %w", err)
			}
		})
		return func() []AggStats {
			wg.Wait()
			if err0 != nil || err1 != nil {
				t.Fatalf("aggregators: %v, %v", err0, err1)
			}
			return []AggStats{st0, final}
		}
	}}
	got, want, _ := runRound(t, nc, js, c, pr, 2, hooks)
	if killedAt != "FOLDED 6" {
		t.Fatalf("first aggregator said %q, want FOLDED 6", killedAt)
	}
	if !slices.Equal(got, want) || !slices.Equal(got, pr.plainSum()) {
		t.Fatal("sum after SIGKILL differs from the single server's")
	}
	if final.Resumed >= 6 || final.Folded != c.Clients-1 {
		t.Errorf("restarted process: resumed %d (want < 6: the 6th fold was never checkpointed), folded %d (want %d)", final.Resumed, final.Folded, c.Clients-1)
	}
}
