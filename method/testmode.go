package method

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
)

// testModeKey marks a context of the reproducible test mode.
type testModeKey struct{}

// WithTestMode returns ctx marked for the reproducible test mode, the
// mode privrec serve and privrec client enter when --seed is given
// (deploy.ServerConfig.TestMode): privrec's commands mark their context so
// when their --seed flag is given. A method whose noise must stay secret
// (dp-als, dp-biases) draws it from the seed only under this mark, and its
// Result then says that the model is not a release; without it, Fit draws
// the noise from crypto/rand, which no seed reproduces.
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

// secretSeed returns a seed from crypto/rand.
func secretSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:])
}
