package secagg

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestGraphRegular(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{10, 4}, {11, 10}, {10, 9}, {101, 16}, {1000, 40}} {
		p := testParams(tc.n, tc.k, 1, 32, 1)
		g := NewGraph(p)
		for u := range uint32(tc.n) {
			nb := g.Neighbours(u)
			if len(nb) != tc.k || !slices.IsSorted(nb) || slices.Contains(nb, u) {
				t.Fatalf("n=%d k=%d: neighbours of %d = %v", tc.n, tc.k, u, nb)
			}
			for _, v := range nb {
				if !g.Adjacent(v, u) {
					t.Fatalf("edge %d–%d not symmetric", u, v)
				}
			}
			if one := Neighbours(p, u); !slices.Equal(one, nb) {
				t.Fatalf("Neighbours(%d) = %v, graph has %v", u, one, nb)
			}
		}
		p.Seed[5] = 1
		if tc.k < tc.n-1 && slices.Equal(NewGraph(p).Neighbours(0), g.Neighbours(0)) &&
			slices.Equal(NewGraph(p).Neighbours(1), g.Neighbours(1)) {
			t.Errorf("n=%d: graph does not depend on the seed", tc.n)
		}
	}
}

func TestShamir(t *testing.T) {
	r := testRand(9)
	var seed [SeedSize]byte
	r.Read(seed[:])
	ids := []uint32{3, 7, 0, 12, 99, 4}
	sh, err := shareSeed(r, &seed, 4, ids)
	if err != nil {
		t.Fatal(err)
	}
	got, err := recoverSeed(4, ids[2:], sh[2:])
	if err != nil || got != seed {
		t.Fatalf("recover from 4 shares: %x, %v; want %x", got, err, seed)
	}
	if _, err := recoverSeed(4, ids[:3], sh[:3]); err == nil {
		t.Fatal("recovered from 3 shares with threshold 4")
	}
	sh[2][1] ^= 1
	if _, err := recoverSeed(4, ids[2:], sh[2:]); err == nil {
		t.Fatal("wrong share gave a valid seed")
	}
}

func TestChooseParams(t *testing.T) {
	for _, tc := range []struct {
		n              int
		dropout, gamma float64
	}{
		{100, 0.1, 0.1}, {1000, 0.1, 0.1}, {1000, 0.3, 0.1}, {6040, 0.1, 0.1},
		{6040, 0.3, 0.1}, {10000, 0.1, 0.1}, {10000, 0.3, 0.1}, {10000, 0.05, 0.05}, {10000, 0.3, 0.2},
	} {
		k, th, err := ChooseParams(tc.n, tc.dropout, tc.gamma)
		if err != nil {
			t.Logf("n=%5d δ=%.2f γ=%.2f: %v", tc.n, tc.dropout, tc.gamma, err)
			continue
		}
		p := Params{N: tc.n, K: k, T: th, Bits: 32, Len: 1}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		logN := math.Log2(float64(tc.n))
		corrupt, dropped := int(tc.gamma*float64(tc.n)), int(tc.dropout*float64(tc.n))
		sec := logN + log2Tail(tc.n-1, corrupt, k, th)
		cor := logN + log2Tail(tc.n-1, dropped, k, k-th+1)
		conn := 2*logN - 1 + float64(k)*math.Log2(tc.dropout+tc.gamma)
		if k == tc.n-1 {
			conn = math.Inf(-1)
		}
		if sec > -SecurityBits || cor > -CorrectnessBits || conn > -SecurityBits {
			t.Errorf("n=%d: K=%d T=%d violates a bound: %.1f %.1f %.1f", tc.n, k, th, sec, cor, conn)
		}
		t.Logf("n=%5d δ=%.2f γ=%.2f: K=%3d T=%3d  log2 P[secrecy fails]=%.1f  P[disconnected]=%.1f  P[abort]=%.1f",
			tc.n, tc.dropout, tc.gamma, k, th, sec, conn, cor)
	}
}

// TestConnectivityMonteCarlo checks the connectivity claim empirically:
// removing a random (γ+δ) fraction of clients leaves the rest connected.
func TestConnectivityMonteCarlo(t *testing.T) {
	n := 1000
	k, _, err := ChooseParams(n, 0.3, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(testRand(11))
	for trial := range 20 {
		p := testParams(n, k, 1, 32, 1)
		p.Seed[9] = byte(trial)
		g := NewGraph(p)
		gone := make([]bool, n)
		for _, u := range r.Perm(n)[:400] {
			gone[u] = true
		}
		start := slices.Index(gone, false)
		seen := make([]bool, n)
		stack := []uint32{uint32(start)}
		seen[start] = true
		reached := 1
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, v := range g.Neighbours(u) {
				if !gone[v] && !seen[v] {
					seen[v] = true
					reached++
					stack = append(stack, v)
				}
			}
		}
		if reached != n-400 {
			t.Fatalf("trial %d: reached %d of %d", trial, reached, n-400)
		}
	}
}
