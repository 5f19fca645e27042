package deploy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/method"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/ratings"
)

// fuzzCases are the federated methods whose clients the fuzz targets feed
// hostile broadcasts: every one of federatedCases, and the variants with
// other client paths (masked rounds, mixture noise shares).
var fuzzCases = func() []fuzzCase {
	var cs []fuzzCase
	for _, c := range federatedCases {
		p := map[string]string{"epochs": "3"}
		if _, ok := c.params["epochs"]; !ok {
			p = c.params // dp-als and dp-biases have no epochs
		}
		cs = append(cs, fuzzCase{c.name, p})
	}
	// sd-fm runs on item IDs: its clients are sdcf's whatever the
	// features, and the tiny catalog has no side files.
	return append(cs,
		fuzzCase{"hdpmf", map[string]string{"epochs": "3", "secagg": "masked"}},
		fuzzCase{"pdpmf", map[string]string{"epochs": "3", "secagg": "masked"}},
		fuzzCase{"ldp-op", map[string]string{"epochs": "3", "secagg": "masked", "per-round": "10"}},
		fuzzCase{"dpmf", map[string]string{"epochs": "3", "noise": "mixture"}},
		fuzzCase{"ldp-op", map[string]string{"epochs": "3", "noise": "mixture", "per-round": "10"}},
		fuzzCase{"ldp-op-basic", map[string]string{"epochs": "3", "noise": "mixture"}},
	)
}()

type fuzzCase struct {
	name   string
	params map[string]string
}

func (c fuzzCase) String() string {
	s := c.name
	for _, k := range []string{"secagg", "noise"} {
		if v, ok := c.params[k]; ok {
			s += "/" + k + "=" + v
		}
	}
	return s
}

// fuzzFleet holds, for every fuzz case, a builder of fresh clients on a
// tiny catalog (a fuzz input meets clients in a known state) and the
// honest broadcasts of a short run, for seeds.
type fuzzFleet struct {
	cases   []fuzzCase
	build   []func() ([]protocol.Client, error)
	honest  [][]*protocol.Broadcast // per case: every round of a short run
	uploads [][]*protocol.Upload    // per case: its first uploads
	snaps   [][][]byte              // per case: the server's snapshots
	server  []func() (protocol.Stateful, error)
}

var (
	fleetOnce sync.Once
	fleet     *fuzzFleet
)

// theFleet builds the fleet once per test binary: 6 users, 12 items.
func theFleet(t testing.TB) *fuzzFleet {
	fleetOnce.Do(func() { fleet = newFleet(t) })
	if fleet == nil {
		t.Fatal("no fleet")
	}
	return fleet
}

func newFleet(t testing.TB) *fuzzFleet {
	d, spl := smallCatalog(t, 6, 12)
	f := &fuzzFleet{}
	for _, c := range fuzzCases {
		spec, cfg := configure(t, c.name, c.params)
		train := spl.Train
		f.cases = append(f.cases, c)
		f.build = append(f.build, func() ([]protocol.Client, error) {
			cls, err := spec.NewClients(cfg, train, 1)
			if err != nil {
				return nil, err
			}
			return cls.List, nil
		})
		bs, ups, snaps := honestBroadcasts(t, spec, cfg, d, train)
		f.honest, f.uploads, f.snaps = append(f.honest, bs), append(f.uploads, ups), append(f.snaps, snaps)
		cat := &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs, ItemTitles: d.ItemTitles, Side: d.Side}
		f.server = append(f.server, func() (protocol.Stateful, error) { return spec.NewServerFor(cfg, cat, 1) })
	}
	return f
}

// honestBroadcasts runs c's protocol in process on train and returns
// copies of its broadcasts (every round of a short run), of its first
// uploads and the server's snapshots before each broadcast.
func honestBroadcasts(t testing.TB, spec method.Spec, cfg any, d, train *ratings.Dataset) ([]*protocol.Broadcast, []*protocol.Upload, [][]byte) {
	t.Helper()
	srv, err := spec.NewServerFor(cfg, &ratings.Dataset{Name: d.Name, Scale: d.Scale, UserIDs: d.UserIDs, ItemIDs: d.ItemIDs,
		ItemTitles: d.ItemTitles, Side: d.Side}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cls, err := spec.NewClients(cfg, train, 1)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Server: srv, state: srv}
	list := make([]protocol.Client, len(cls.List))
	for k, c := range cls.List {
		list[k] = &uploadRecorder{Client: c, rec: rec}
	}
	err = protocol.Run(context.Background(), rec, list, protocol.RunOptions{Seed: 1, Aggregation: spec.Federated.Aggregation(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return rec.out, rec.ups, rec.snaps
}

// uploadRecorder keeps copies of a client's first uploads in rec.
type uploadRecorder struct {
	protocol.Client
	rec *recorder
}

func (c *uploadRecorder) Round(b *protocol.Broadcast, r *rand.Rand) (*protocol.Upload, error) {
	up, err := c.Client.Round(b, r)
	if up != nil && err == nil {
		c.rec.mu.Lock()
		if len(c.rec.ups) < 8 {
			u := *up
			u.Items, u.Values, u.Counts, u.Scalars, u.Words = slices.Clone(up.Items), slices.Clone(up.Values),
				slices.Clone(up.Counts), slices.Clone(up.Scalars), slices.Clone(up.Words)
			c.rec.ups = append(c.rec.ups, &u)
		}
		c.rec.mu.Unlock()
	}
	return up, err
}

// recorder keeps copies of a server's broadcasts.
type recorder struct {
	protocol.Server
	state protocol.Stateful
	snaps [][]byte
	out   []*protocol.Broadcast
	mu    sync.Mutex
	ups   []*protocol.Upload
}

func (r *recorder) Broadcast(round int) (*protocol.Broadcast, error) {
	if snap, err := r.state.MarshalBinary(); err == nil {
		r.snaps = append(r.snaps, snap)
	}
	b, err := r.Server.Broadcast(round)
	if err == nil {
		r.out = append(r.out, copyBroadcast(b))
	}
	return b, err
}

func copyBroadcast(b *protocol.Broadcast) *protocol.Broadcast {
	c := *b
	c.Items, c.V, c.Counts, c.Aux = slices.Clone(b.Items), slices.Clone(b.V), slices.Clone(b.Counts), slices.Clone(b.Aux)
	c.Params = map[string]float64{}
	for k, v := range b.Params {
		c.Params[k] = v
	}
	return &c
}

// feed runs b through every client of fresh fleets of every case: after
// the honest setup round (so that a training round meets set-up clients)
// and without it. A client may refuse b; it must not panic.
func (f *fuzzFleet) feed(t *testing.T, b *protocol.Broadcast) {
	for k := range f.cases {
		for _, setup := range []bool{true, false} {
			cls, err := f.build[k]()
			if err != nil {
				t.Fatal(err)
			}
			if setup && len(f.honest[k]) > 0 {
				roundEach(cls, f.honest[k][0])
			}
			for _, c := range cls {
				if !roundSafe(t, f.cases[k], c, b, setup) {
					break // one report per case
				}
			}
		}
	}
}

// roundSafe runs c on b and reports a panic.
func roundSafe(t *testing.T, fc fuzzCase, c protocol.Client, b *protocol.Broadcast, setup bool) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%v (after setup %v): client %d panicked on round %d %s, %d items × %d, |Items| %d, |V| %d, |Counts| %d, |Aux| %d (AuxDim %d), words %d/%d bits, params %v: %v",
				fc, setup, c.ID(), b.Round, b.Phase, b.NumItems, b.Dim, len(b.Items), len(b.V), len(b.Counts), len(b.Aux), b.AuxDim, b.Words, b.Bits, b.Params, p)
			ok = false
		}
	}()
	c.Round(b, rand.New(rand.NewPCG(1, uint64(c.ID()))))
	return true
}

func roundEach(cls []protocol.Client, b *protocol.Broadcast) {
	for _, c := range cls {
		c.Round(b, rand.New(rand.NewPCG(2, uint64(c.ID()))))
	}
}

// spoilers are the ways a hostile server spoils a broadcast: without V,
// counts, Aux or items; resized; non-finite; odd words.
var spoilers = func() []func(c *protocol.Broadcast) {
	var out []func(c *protocol.Broadcast)
	add := func(f func(c *protocol.Broadcast)) { out = append(out, f) }
	add(func(c *protocol.Broadcast) { c.V = nil })
	add(func(c *protocol.Broadcast) { c.Counts = nil })
	add(func(c *protocol.Broadcast) { c.Aux, c.AuxDim = nil, c.Dim })
	add(func(c *protocol.Broadcast) { c.Aux = nil })
	add(func(c *protocol.Broadcast) { c.Items = nil })
	add(func(c *protocol.Broadcast) { c.Items = []int32{0} })
	add(func(c *protocol.Broadcast) { c.Phase = protocol.PhaseTrain })
	add(func(c *protocol.Broadcast) { c.Phase = protocol.PhaseFinal })
	add(func(c *protocol.Broadcast) { c.Round += 5 })
	add(func(c *protocol.Broadcast) { c.Round = -1 })
	add(func(c *protocol.Broadcast) { c.Dim++ })
	add(func(c *protocol.Broadcast) { c.NumItems-- })
	add(func(c *protocol.Broadcast) { c.NumItems++ })
	add(func(c *protocol.Broadcast) {
		if len(c.Counts) > 0 {
			c.Counts = c.Counts[1:]
		}
	})
	add(func(c *protocol.Broadcast) {
		for k := range c.Counts {
			c.Counts[k] = -c.Counts[k] - 1
		}
	})
	add(func(c *protocol.Broadcast) {
		for k := range c.V {
			c.V[k] = float32(math.NaN())
		}
	})
	add(func(c *protocol.Broadcast) {
		for k := range c.V {
			c.V[k] = 3e38
		}
	})
	add(func(c *protocol.Broadcast) {
		for k := range c.Params {
			c.Params[k] = math.NaN()
		}
		c.Params["lr-user"], c.Params["eta"] = math.Inf(1), math.NaN()
	})
	add(func(c *protocol.Broadcast) { clear(c.Params) })
	add(func(c *protocol.Broadcast) { c.Params["fit"] = 1 })
	add(func(c *protocol.Broadcast) { c.Words, c.Bits = c.Words+7, 32 })
	add(func(c *protocol.Broadcast) { c.Words, c.Bits = 1<<30, 32 })
	add(func(c *protocol.Broadcast) { c.Words, c.Bits = 0, 0 })
	add(func(c *protocol.Broadcast) { c.Bits = 1 })
	add(func(c *protocol.Broadcast) {
		for k := range c.Aux {
			c.Aux[k] = float32(math.Inf(-1))
		}
	})
	return out
}()

// hostileVariants returns b spoiled by each of spoilers.
func hostileVariants(b *protocol.Broadcast) []*protocol.Broadcast {
	var out []*protocol.Broadcast
	for _, f := range spoilers {
		c := copyBroadcast(b)
		f(c)
		out = append(out, c)
	}
	return out
}

// TestHostileBroadcastsNoPanic: every federated client refuses (or
// answers) every hostile variant of every honest broadcast of its own
// and of every other method, and never panics.
func TestHostileBroadcastsNoPanic(t *testing.T) {
	f := theFleet(t)
	var all []*protocol.Broadcast
	for _, hs := range f.honest {
		for _, b := range hs {
			all = append(all, b)
			all = append(all, hostileVariants(b)...)
		}
	}
	t.Logf("%d broadcasts × %d cases", len(all), len(f.cases))
	for _, b := range all {
		f.feed(t, b)
	}
}

// FuzzBroadcast decodes arbitrary bytes as a wire broadcast and feeds
// what fromWireBroadcast accepts to every federated method's clients: a
// client may refuse it, never panic.
func FuzzBroadcast(f *testing.F) {
	fl := theFleet(f)
	for _, hs := range fl.honest {
		for _, b := range hs {
			if raw, err := proto.Marshal(toWireBroadcast(b)); err == nil {
				f.Add(raw)
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var w fedv1.Broadcast
		if proto.Unmarshal(raw, &w) != nil {
			return
		}
		b, err := fromWireBroadcast(&w)
		if err != nil {
			return
		}
		fl.feed(t, b)
	})
}

// FuzzHostileBroadcast spoils an honest broadcast (the input picks the
// case, the round and a set of spoilers, applied in order, and may shift
// the round, the word count and the bits) and feeds it, through the wire
// and fromWireBroadcast as a session would, to every configuration's
// clients: they may refuse it, never panic. It reaches combinations of
// spoilt fields that byte mutations of FuzzBroadcast's protobuf rarely
// do.
func FuzzHostileBroadcast(f *testing.F) {
	fl := theFleet(f)
	for k := range fl.cases {
		for r := range 3 {
			f.Add(uint8(k), uint8(r), uint32(1)<<(k%len(spoilers)), int32(0), int8(0))
		}
	}
	f.Fuzz(func(t *testing.T, k, r uint8, set uint32, words int32, round int8) {
		bs := fl.honest[int(k)%len(fl.cases)]
		b := copyBroadcast(bs[int(r)%len(bs)])
		for n, spoil := range spoilers {
			if set&(1<<(n%32)) != 0 {
				spoil(b)
			}
		}
		b.Words += int(words % (1 << 16))
		b.Round += int(round)
		w, err := fromWireBroadcast(toWireBroadcast(b))
		if err != nil {
			return
		}
		fl.feed(t, w)
	})
}

// FuzzUpload decodes arbitrary bytes as a wire upload and runs the
// server's check of it against every honest broadcast (as the round the
// upload names): it may refuse the upload, never panic.
func FuzzUpload(f *testing.F) {
	fl := theFleet(f)
	for _, ups := range fl.uploads {
		for _, u := range ups[:min(2, len(ups))] {
			if raw, err := proto.Marshal(toWireUpload(u.Round, u, false)); err == nil {
				f.Add(raw)
			}
		}
	}
	srv := &Server{cfg: ServerConfig{MaxAbs: 1e8}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var w fedv1.UploadRequest
		if proto.Unmarshal(raw, &w) != nil {
			return
		}
		u := fromWireUpload(3, &w)
		if u == nil {
			return
		}
		for _, bs := range fl.honest {
			for _, b := range bs {
				c := *b
				c.Round = u.Round
				srv.check(&c, u)
			}
		}
	})
}

// FuzzSnapshot restores arbitrary bytes as the state of a method's
// server (the first input byte picks the method of fuzzCases): the server
// may refuse the snapshot, never panic, and a server that accepts one
// broadcasts its next round without panicking.
func FuzzSnapshot(f *testing.F) {
	fl := theFleet(f)
	for k, snaps := range fl.snaps {
		for _, s := range snaps {
			f.Add(uint8(k), s)
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, snap []byte) {
		n := int(k) % len(fl.cases)
		srv, err := fl.server[n]()
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("%v: server panicked on a snapshot: %v", fl.cases[n], p)
			}
		}()
		if srv.UnmarshalBinary(snap) != nil {
			return
		}
		if !srv.Done() {
			srv.Broadcast(srv.Round())
		}
	})
}

// TestWriteFuzzCorpus writes the seed corpora of the fuzz targets under
// testdata/fuzz when PRIVREC_WRITE_CORPUS is set: for hdpmf, ldp-op and
// sdmf, plain and masked, the setup and first training broadcasts and the
// latter without V, a first upload, and the server's snapshot after the
// first training round.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("PRIVREC_WRITE_CORPUS") == "" {
		t.Skip("set PRIVREC_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	fl := theFleet(t)
	write := func(target, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, a := range args {
			switch a := a.(type) {
			case uint8:
				body += fmt.Sprintf("uint8(%d)\n", a)
			case []byte:
				body += fmt.Sprintf("[]byte(%q)\n", a)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wire := func(m proto.Message) []byte {
		raw, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for k, c := range fl.cases {
		if c.name != "hdpmf" && c.name != "ldp-op" && c.name != "sdmf" || c.params["noise"] != "" {
			continue
		}
		name := strings.ReplaceAll(c.String(), "/", "-")
		bs := fl.honest[k]
		first := bs[min(1, len(bs)-1)]
		if c.name == "ldp-op" {
			first = bs[min(2, len(bs)-1)] // after the setup and the fit
		}
		noV := copyBroadcast(first)
		noV.V = nil
		write("FuzzBroadcast", name+"-setup", wire(toWireBroadcast(bs[0])))
		write("FuzzBroadcast", name+"-train", wire(toWireBroadcast(first)))
		write("FuzzBroadcast", name+"-train-no-v", wire(toWireBroadcast(noV)))
		if ups := fl.uploads[k]; len(ups) > 0 {
			u := ups[len(ups)-1]
			write("FuzzUpload", name, wire(toWireUpload(u.Round, u, false)))
		}
		if snaps := fl.snaps[k]; len(snaps) > 2 {
			write("FuzzSnapshot", name, uint8(k), snaps[2])
		}
	}
}
