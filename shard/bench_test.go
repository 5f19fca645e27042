package shard

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/privrec/privrec/secagg"
)

// BenchmarkShardedRound measures one secure-aggregation round through
// JetStream with S = 1, 2, 4 aggregators on loopback, scaled down from
// the 1M users × 100K items: N = 200 clients a round, L = 100,000
// words a client (100K items, one word each, or 10K items × 10 factors),
// K = 20, no dropouts. Timed: every client's upload (split by shard,
// published on one of 8 connections, committed), the aggregators'
// folding, the close, the unmasking shares, the mask streams and every
// shard's unmasking and result. Not timed: the key and share steps and
// the clients' masking, nor a first round that warms up. Reported:
// uploads a second, upload MB a second, and the slowest shard's
// unmasking time.
func BenchmarkShardedRound(b *testing.B) {
	for _, shards := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("S=%d", shards), func(b *testing.B) {
			_, js := startNATS(b)
			url := js.Conn().ConnectedUrl()
			benchRounds(b, js, func() (*nats.Conn, error) { return nats.Connect(url) },
				Config{Run: fmt.Sprintf("bench%d", shards), Shards: shards}, nil)
		})
	}
}

// BenchmarkClusterRound is BenchmarkShardedRound's round (S = 2) on
// nats-server processes of the test binary: one server (R1), three
// clustered nodes with streams of one replica, and of three. The
// nodes' CPU (from /proc) is reported apart (server-cpu-s/round) from
// the test process's (clients, coordinator, aggregators:
// cpu-s/round).
func BenchmarkClusterRound(b *testing.B) {
	for _, tc := range []struct {
		name            string
		nodes, replicas int
	}{{"single-R1", 1, 1}, {"cluster-R1", 3, 1}, {"cluster-R3", 3, 3}} {
		b.Run(tc.name, func(b *testing.B) {
			cl := startNodes(b, tc.nodes)
			_, js := cl.connect(b)
			benchRounds(b, js, func() (*nats.Conn, error) { return nats.Connect(cl.urls()) },
				Config{Run: "bench" + strings.ReplaceAll(tc.name, "-", ""), Shards: 2, Replicas: tc.replicas}, cl.cpu)
		})
	}
}

// benchRounds runs b.N rounds (after one untimed) of 200 clients and
// 100,000 words on run
// c (its Run, Shards and Replicas), the clients, coordinator and
// aggregators on 8 connections dial makes; serverCPU, if set, is the
// servers' CPU time so far when they run in other processes.
func benchRounds(b *testing.B, js jetstream.JetStream, dial func() (*nats.Conn, error), c Config, serverCPU func() time.Duration) {
	const n, l, k = 200, 100_000, 20
	shards := c.Shards
	conns := make([]*nats.Conn, 8)
	jss := make([]jetstream.JetStream, len(conns))
	for i := range conns {
		var err error
		if conns[i], err = dial(); err != nil {
			b.Fatal(err)
		}
		defer conns[i].Close()
		jss[i], _ = jetstream.New(conns[i])
	}
	c.Len, c.Clients, c.Bits = l, n, 32
	p := secagg.Params{N: n, K: k, T: k/2 + 1, Bits: 32, Len: l}
	r := rand.New(rand.NewPCG(1, 2))
	inputs := make([][]uint32, n)
	for u := range inputs {
		inputs[u] = make([]uint32, l)
		for i := range inputs[u] {
			inputs[u][i] = r.Uint32() >> 12
		}
	}
	var unmask, uploadPhase, cpu, srvCPU time.Duration
	b.ResetTimer()
	// Round 0 warms up, untimed: on a fresh cluster the first round's
	// consumers at times took one RAFT election timeout (4-9 s) before
	// serving their first pull.
	for it := range b.N + 1 {
		b.StopTimer()
		round := uint64(it + 1)
		p.Seed[0] = byte(round)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		co, err := NewCoordinator(ctx, conns[0], js, c, p, round)
		if err != nil {
			b.Fatal(err)
		}
		rnd := rand.NewChaCha8([32]byte{byte(round)})
		clients := make([]*secagg.Client, n)
		for u := range n {
			clients[u], _ = secagg.NewClient(uint32(u), p, rnd)
			m, _ := clients[u].AdvertiseKeys()
			if err := co.Server().AddKeys(m); err != nil {
				b.Fatal(err)
			}
		}
		kb, err := co.Server().FinishKeys()
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range kb {
			m, err := clients[x.To].ShareKeys(x)
			if err != nil {
				b.Fatal(err)
			}
			if err := co.Server().AddShares(m); err != nil {
				b.Fatal(err)
			}
		}
		sd, err := co.Server().FinishShares()
		if err != nil {
			b.Fatal(err)
		}
		masked := make([]*secagg.MaskedInput, len(sd))
		for i, d := range sd {
			if masked[i], err = clients[d.To].MaskedInput(d, inputs[d.To]); err != nil {
				b.Fatal(err)
			}
		}
		stats := make([]AggStats, shards)
		errs := make([]error, shards)
		var wg sync.WaitGroup
		for s := range shards {
			ag, err := NewAggregator(jss[s%len(jss)], c, s)
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() { stats[s], errs[s] = ag.Round(ctx, round) })
		}
		if err := co.Listen(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0, t0 := cpuTime(), time.Now()
		var srv0 time.Duration
		if serverCPU != nil {
			srv0 = serverCPU()
		}
		var up sync.WaitGroup
		next := make(chan *secagg.MaskedInput)
		for w := range 16 {
			up.Go(func() {
				for m := range next {
					if _, err := Upload(ctx, conns[w%len(conns)], jss[w%len(jss)], c, round, m); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for _, m := range masked {
			next <- m
		}
		close(next)
		up.Wait()
		uploadPhase += time.Since(t0)
		reqs, err := co.CloseInput(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range reqs {
			m, err := clients[q.To].Unmask(q)
			if err != nil {
				b.Fatal(err)
			}
			if err := co.Server().AddUnmask(m); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := co.Sum(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		b.StopTimer()
		cpu += cpuTime() - cpu0
		if serverCPU != nil {
			srvCPU += serverCPU() - srv0
		}
		for s, err := range errs {
			if err != nil {
				b.Fatalf("shard %d: %v", s, err)
			}
			unmask = max(unmask, stats[s].Unmasking)
			b.Logf("round %d shard %d: %+v", round, s, stats[s])
		}
		if err := co.Broadcast(ctx, nil); err != nil {
			b.Fatal(err)
		}
		cancel()
		if it == 0 {
			unmask, uploadPhase, cpu, srvCPU = 0, 0, 0, 0
			b.ResetTimer()
		}
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(n)/sec, "uploads/s")
	b.ReportMetric(float64(n)*4*l/1e6/sec, "MB/s")
	b.ReportMetric(unmask.Seconds(), "s-unmask-slowest-shard")
	b.ReportMetric(uploadPhase.Seconds()/float64(b.N), "s-upload-phase")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/round")
	if serverCPU != nil {
		b.ReportMetric(srvCPU.Seconds()/float64(b.N), "server-cpu-s/round")
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkJetStreamPublish is the baseline for BenchmarkShardedRound:
// the same 200 × 400 KB a round published by 16 goroutines on 8
// connections to a work-queue file-store stream, no consumer, no
// secure aggregation.
func BenchmarkJetStreamPublish(b *testing.B) {
	const n, l = 200, 100_000
	_, js := startNATS(b)
	url := js.Conn().ConnectedUrl()
	jss := make([]jetstream.JetStream, 8)
	for i := range jss {
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		jss[i], _ = jetstream.New(nc)
	}
	ctx := context.Background()
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "BASE", Subjects: []string{"base.>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4*l)
	var cpu time.Duration
	b.ResetTimer()
	for it := range b.N {
		cpu0 := cpuTime()
		var wg sync.WaitGroup
		next := make(chan int)
		for w := range 16 {
			wg.Go(func() {
				for u := range next {
					if _, err := jss[w%len(jss)].Publish(ctx, fmt.Sprintf("base.%d", it), data,
						jetstream.WithMsgID(fmt.Sprintf("%d.%d", u, it))); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for u := range n {
			next <- u
		}
		close(next)
		wg.Wait()
		cpu += cpuTime() - cpu0
		b.StopTimer()
		if err := st.Purge(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(n)/sec, "uploads/s")
	b.ReportMetric(float64(n)*4*l/1e6/sec, "MB/s")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/round")
}

// BenchmarkAddRange is an aggregator's unmasking cost a stream: it
// expands and subtracts 25,000 words (one of 4 shards of 100,000) from
// the middle of a mask stream.
func BenchmarkAddRange(b *testing.B) {
	key := [16]byte{3}
	dst := make([]uint32, 25_000)
	b.SetBytes(int64(4 * len(dst)))
	for b.Loop() {
		addRange(dst, &key, 50_001, true)
	}
}

// BenchmarkResultSignature is what signing costs a shard result: the
// aggregator's Ed25519 signature and the coordinator's verification of
// one shard of BenchmarkShardedRound's 100,000 words over 4 shards
// (25,000 words, 100 KB).
func BenchmarkResultSignature(b *testing.B) {
	_, privs := aggregatorKeys(b, 1)
	pub := privs[0].Public().(ed25519.PublicKey)
	data := encodeWords(make([]uint32, 25_000))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		sig := ed25519.Sign(privs[0], resultMessage("bench", 1, 0, data))
		if !ed25519.Verify(pub, resultMessage("bench", 1, 0, data), sig) {
			b.Fatal("signature does not verify")
		}
	}
}
