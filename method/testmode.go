package method

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"strings"
)

// testModeKey marks a context of the reproducible test mode.
type testModeKey struct{}

// WithTestMode returns ctx marked for the reproducible test mode, the
// mode privrec serve and privrec client enter when --seed is given
// (deploy.ServerConfig.TestMode): privrec's commands mark their context so
// when their --seed flag is given. Every private method (a claim whose
// unit is not "none") draws its noise from the seed only under this mark
// (or its own test-mode field, dp-ease's seeded, dp-pop's reproducible,
// which the mark sets), and its Result then says that the model is not a
// release; without it, Fit draws the seed, and with it the noise, from
// crypto/rand, which no seed reproduces.
func WithTestMode(ctx context.Context) context.Context {
	return context.WithValue(ctx, testModeKey{}, true)
}

// TestMode reports whether ctx is marked for the reproducible test mode.
func TestMode(ctx context.Context) bool {
	on, _ := ctx.Value(testModeKey{}).(bool)
	return on
}

// TestModeNote is the label of a private run whose noise the seed
// reproduces.
const TestModeNote = "TEST MODE: the noise was drawn from the run's seed (--seed), which reproduces it, so anyone who knows " +
	"the seed can remove it: this model is not a release and carries no privacy guarantee; run without --seed to draw the " +
	"noise from crypto/rand"

// ownTestModeFields are the config fields by which a method selects the
// test mode itself (dp-ease's --seeded, dp-pop's --reproducible).
var ownTestModeFields = []string{"seeded", "reproducible"}

// noiseSource applies the one rule of a private method's noise to a run
// of s with cfg and seed: outside the test mode the seed is replaced by
// one from crypto/rand, so no flag reproduces the noise (nor anything
// else the run draws); in the test mode (the context's mark, or the
// method's own field) the seed reproduces it. A context in the test mode
// also sets the method's own field, on a copy of cfg. It returns the
// config and seed to run with, and whether the run is in the test mode.
// A method without a claim is left alone.
func (s Spec) noiseSource(ctx context.Context, cfg any, seed uint64) (any, uint64, bool, error) {
	if s.Claim.Unit == "none" {
		return cfg, seed, false, nil
	}
	own := func(c any) bool {
		for _, name := range ownTestModeFields {
			if f, err := s.Field(c, name); err == nil && f.Value.String() == "true" {
				return true
			}
		}
		return false
	}
	switch {
	case TestMode(ctx):
		for _, name := range ownTestModeFields {
			if !s.Has(name) || own(cfg) {
				continue
			}
			c, err := s.Configure(s.Text(cfg))
			if err != nil {
				return nil, 0, false, err
			}
			if err := s.Set(c, name, "true"); err != nil {
				return nil, 0, false, err
			}
			cfg = c
		}
		return cfg, seed, true, nil
	case own(cfg):
		return cfg, seed, true, nil
	}
	return cfg, secretSeed(), false, nil
}

// labelNoise says in a private run's Result where its noise came from:
// in the test mode, that the seed reproduces it (TestModeNote, unless the
// method's own note says so already, and Stats["test_mode"] = 1);
// otherwise that it came from crypto/rand.
func (s Spec) labelNoise(res *Result, test bool) {
	if s.Claim.Unit == "none" || res == nil {
		return
	}
	if !test {
		if !strings.Contains(res.Privacy.Note, secretNote) {
			res.Privacy.Note += "; " + secretNote
		}
		return
	}
	if !strings.Contains(res.Privacy.Note, "TEST MODE") {
		res.Privacy.Note = TestModeNote + "; " + res.Privacy.Note
	}
	if res.Stats == nil {
		res.Stats = map[string]float64{}
	}
	res.Stats["test_mode"] = 1
}

// secretNote ends the note of a private run outside the test mode.
const secretNote = "the noise was drawn from crypto/rand (no seed reproduces it)"

// secretSeed returns a seed from crypto/rand.
func secretSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:])
}
