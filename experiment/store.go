package experiment

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/privrec/privrec/internal/atomicfile"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/privrec/privrec/model"
)

// Num is a float64 that is written to JSON as null when it is NaN or
// infinite, and read back from null as NaN.
type Num float64

// MarshalJSON writes null for a non-finite number.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads null as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Privacy is model.Privacy with JSON-safe numbers.
type Privacy struct {
	Unit     string `json:"unit"`
	Trusted  string `json:"trusted"`
	EpsRound Num    `json:"eps_round"`
	EpsTotal Num    `json:"eps_total"`
	Delta    Num    `json:"delta"`
	Note     string `json:"note,omitempty"`
}

func privacyOf(p model.Privacy) Privacy {
	return Privacy{Unit: p.Unit, Trusted: p.Trusted, EpsRound: Num(p.EpsRound), EpsTotal: Num(p.EpsTotal), Delta: Num(p.Delta), Note: p.Note}
}

// Record is a finished cell as stored: the cell and what it measured.
type Record struct {
	Cell
	// Metrics holds rmse, mse, mae and, when asked for, auc, precision,
	// recall, ndcg.
	Metrics map[string]Num `json:"metrics"`
	CDF     []Num          `json:"cdf,omitempty"`
	// Curve is the training RMSE after each epoch, when reported.
	Curve    []Num          `json:"curve,omitempty"`
	Privacy  Privacy        `json:"privacy"`
	Stats    map[string]Num `json:"stats,omitempty"`
	Train    int            `json:"train_ratings"`
	Test     int            `json:"test_ratings"`
	Seconds  float64        `json:"seconds"`
	Finished time.Time      `json:"finished"`
}

// store is an append-only JSON-lines file of records, one per line,
// synced after every write, keyed by cell key. A line cut short by a crash
// is dropped when the store is opened.
type store struct {
	mu   sync.Mutex
	f    *os.File
	recs map[string]*Record
}

func openStore(path string) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	s := &store{recs: map[string]*Record{}}
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	good := len(data)
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		good = i + 1 // a partial last line
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:good]))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("experiment: %s:%d: %v (delete the line or the file to recompute)", path, line, err)
		}
		s.recs[r.Key] = &r
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if good != len(data) {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return nil, err
	}
	s.f = f
	return s, nil
}

func (s *store) get(key string) *Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs[key]
}

func (s *store) put(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(b); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	s.recs[r.Key] = r
	return nil
}

func (s *store) close() error { return s.f.Close() }

// writeAtomic writes data to path through a temporary file in the same
// folder and a rename, so that no reader sees a half-written file.
func writeAtomic(path string, data []byte) error {
	return writeAtomicFunc(path, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

func writeAtomicFunc(path string, write func(*os.File) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(path, write); err != nil {
		return fmt.Errorf("experiment: writing %s: %w", path, err)
	}
	return nil
}
