package protocol

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/privrec/privrec/ratings"
)

// planLabel starts the bytes PlanDigest hashes.
const planLabel = "privrec/plan/v1\x00"

// PlanDigest names a run's public plan: the hex SHA-256 of an unambiguous
// encoding of its method, its configuration, its rating scale and its
// item catalog (the IDs in order). The server's address is not part of
// it: a client's memory of the rounds it answered (deploy's
// ClientConfig.Memory, the browser's) is kept per plan, so that a second
// server running the same plan is the same run to it, and a client never
// answers a plan's round twice.
//
// config should be the configuration with every key (Method.Text of the
// configured plan), so that a plan that leaves a default out names the
// same run as one that spells it.
func PlanDigest(method string, config map[string]string, scale ratings.Scale, items []string) string {
	b := []byte(planLabel)
	str := func(s string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(method)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range config {
			if !yield(k) {
				return
			}
		}
	})
	b = binary.BigEndian.AppendUint64(b, uint64(len(keys)))
	for _, k := range keys {
		str(k)
		str(config[k])
	}
	for _, x := range []float32{scale.Min, scale.Max, scale.Step} {
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(items)))
	for _, it := range items {
		str(it)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// SessionContext is the bytes every signature of secure aggregation's
// active protocol is bound to in one session of one round of a run
// (secagg.Auth.Context, secagg.Verifier.Context): the command-line
// client, the browser and a server that checks signatures compute it
// alike.
func SessionContext(run string, round int, session string) []byte {
	return fmt.Appendf(nil, "privrec/deploy/v1 run=%q round=%d session=%q", run, round, session)
}
