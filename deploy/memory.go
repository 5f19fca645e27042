package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/privrec/privrec/internal/atomicfile"
)

// memory is what a session's clients keep of one plan across restarts
// (ClientConfig.Memory): the enrolment secrets, so that a restarted
// client enrols again as the same client IDs, and the rounds answered,
// so that it never answers a plan's round twice — to the server it
// answered, restarted, or to another server running the same plan. It
// is written durably before any answer leaves the process.
//
// Two runs of one plan are one run to the memory: a second run of the
// same plan (the same method, configuration, scale and catalog) needs
// another memory directory.
type memory struct {
	dir, plan string
	enrol     memoryEnrol
	rounds    memoryRounds
}

// memoryEnrol is the file <plan>.enrol.json, written once before the
// clients enrol.
type memoryEnrol struct {
	Plan    string   `json:"plan"`
	Method  string   `json:"method"`
	Secrets []string `json:"secrets"` // the k-th client's enrolment secret
}

// memoryRounds is the file <plan>.rounds.json, written before every
// round's answers leave.
type memoryRounds struct {
	Plan string `json:"plan"`
	// Setup is the round of the setup phase the clients answered, Last
	// the last round they answered; -1 for none.
	Setup int `json:"setup"`
	Last  int `json:"last"`
	// Trained holds, per client of the session, the training rounds it
	// answered (ascending), which the plan's participation limits are
	// checked against (protocol.Participation.Allows); absent in a
	// memory of a plan without limits.
	Trained [][]int `json:"trained,omitempty"`
}

// writeMemory writes a memory file durably (a variable for the test that
// a failed write stops the answers).
var writeMemory = atomicfile.WriteFile

// openMemory reads the memory of plan in dir, or starts an empty one
// (creating dir, mode 0700: it holds the clients' credentials).
func openMemory(dir, plan, method string) (*memory, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("deploy: memory: %w", err)
	}
	m := &memory{dir: dir, plan: plan, enrol: memoryEnrol{Plan: plan, Method: method},
		rounds: memoryRounds{Plan: plan, Setup: -1, Last: -1}}
	for _, f := range []struct {
		path string
		into any
	}{{m.enrolPath(), &m.enrol}, {m.roundsPath(), &m.rounds}} {
		raw, err := os.ReadFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("deploy: memory: %w", err)
		}
		if err := json.Unmarshal(raw, f.into); err != nil {
			return nil, fmt.Errorf("deploy: memory %s: %w", f.path, err)
		}
	}
	if m.enrol.Plan != plan || m.rounds.Plan != plan {
		return nil, fmt.Errorf("deploy: memory %s: the files name another plan than %s", dir, plan)
	}
	if m.rounds.Last < -1 || m.rounds.Setup < -1 || m.rounds.Setup > m.rounds.Last {
		return nil, fmt.Errorf("deploy: memory %s: field setup = %d, last = %d: want -1 <= setup <= last", m.roundsPath(), m.rounds.Setup, m.rounds.Last)
	}
	return m, nil
}

func (m *memory) enrolPath() string  { return filepath.Join(m.dir, m.plan+".enrol.json") }
func (m *memory) roundsPath() string { return filepath.Join(m.dir, m.plan+".rounds.json") }

// secrets returns the n clients' enrolment secrets: those remembered, or
// fresh ones from draw, written durably before they are returned.
func (m *memory) secrets(n int, draw func() string) ([]string, error) {
	if got := len(m.enrol.Secrets); got > 0 {
		if got != n {
			return nil, fmt.Errorf("deploy: memory %s holds the secrets of %d clients of this plan, and this session has %d: a session of the plan enrols the same clients again (or takes another --state)", m.enrolPath(), got, n)
		}
		return m.enrol.Secrets, nil
	}
	sec := make([]string, n)
	for k := range sec {
		sec[k] = draw()
	}
	m.enrol.Secrets = sec
	raw, err := json.Marshal(m.enrol)
	if err != nil {
		return nil, err
	}
	if err := writeMemory(m.enrolPath(), raw, 0o600); err != nil {
		m.enrol.Secrets = nil
		return nil, fmt.Errorf("deploy: memory: %w", err)
	}
	return sec, nil
}

// answer records, durably, that the clients answer round r (a setup
// round when setup): the caller sends nothing of r before it returns.
func (m *memory) answer(r int, setup bool, trained [][]int) error {
	next := m.rounds
	next.Last = max(next.Last, r)
	if setup && next.Setup < 0 {
		next.Setup = r
	}
	if trained != nil {
		next.Trained = trained
	}
	if next.Last == m.rounds.Last && next.Setup == m.rounds.Setup && trained == nil {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := writeMemory(m.roundsPath(), raw, 0o600); err != nil {
		return fmt.Errorf("deploy: memory: %w", err)
	}
	m.rounds = next
	return nil
}
