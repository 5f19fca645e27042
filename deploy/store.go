package deploy

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrState is wrapped by errors about a state directory that does not
// belong to this run or is damaged.
var ErrState = errors.New("deploy: bad server state")

var (
	bucketMeta   = []byte("meta")
	bucketEnrol  = []byte("enrol")
	bucketState  = []byte("state")
	bucketLedger = []byte("ledger")
	bucketFolded = []byte("folded")
	bucketCodes  = []byte("codes")
	bucketParty  = []byte("party")
	bucketMasked = []byte("masked")
	bucketBans   = []byte("bans")
	bucketWeight = []byte("weight")

	keyPlan   = []byte("plan")
	keyRound  = []byte("round")
	keyServer = []byte("server")
	keyModel  = []byte("model")
	keyShares = []byte("shares")
)

// store is the server's durable state in a bbolt file: the run's plan,
// the enrolled clients, the method server's snapshot at the last round
// boundary with its round number, the ledger of released rounds, the ids
// of the uploads folded in each round, and the final model. Every write is
// one transaction, fsynced before it returns.
type store struct {
	db *bolt.DB
}

// openStore opens (creating) DIR/state.db.
func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("deploy: state directory: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("deploy: open %s: %w (is another server using this state directory?)", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketEnrol, bucketState, bucketLedger, bucketFolded, bucketMasked, bucketBans, bucketCodes, bucketParty, bucketWeight} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("deploy: init %s: %w", path, err)
	}
	return &store{db: db}, nil
}

func (s *store) Close() error { return s.db.Close() }

// plan returns the stored plan, or nil when the state is new.
func (s *store) plan() (*plan, error) {
	var p *plan
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(keyPlan)
		if raw == nil {
			return nil
		}
		p = new(plan)
		if err := json.Unmarshal(raw, p); err != nil {
			return fmt.Errorf("%w: plan: %w", ErrState, err)
		}
		return nil
	})
	return p, err
}

func (s *store) putPlan(p *plan) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyPlan, raw) })
}

func u32key(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// enrol stores the credential hashes of new clients and the party that
// enrolled them in one transaction; with code (the hash of a one-time
// enrolment code, nil for the vendor token) it also marks the code spent
// by the first client. users > 1 is the number of users each client
// answers for as a party (EnrollRequest.users). It fails, storing
// nothing, when an id is taken or the code is unknown or spent.
func (s *store) enrol(ids []uint32, hashes [][32]byte, party string, code *[32]byte, users int) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if code != nil {
			cb := tx.Bucket(bucketCodes)
			switch v := cb.Get(code[:]); {
			case v == nil:
				return errNoCode
			case len(v) != 1:
				return errCodeSpent
			case len(ids) != 1:
				return fmt.Errorf("an enrolment code enrols one client, not %d", len(ids))
			}
			rec := append(u32key(ids[0]), hashes[0][:]...)
			if err := cb.Put(code[:], rec); err != nil {
				return err
			}
		}
		b, pb := tx.Bucket(bucketEnrol), tx.Bucket(bucketParty)
		for k, id := range ids {
			if b.Get(u32key(id)) != nil {
				return fmt.Errorf("%w: client %d", errTaken, id)
			}
			if err := b.Put(u32key(id), hashes[k][:]); err != nil {
				return err
			}
			if err := pb.Put(u32key(id), []byte(party)); err != nil {
				return err
			}
			if users > 1 {
				if err := tx.Bucket(bucketWeight).Put(u32key(id), u32key(uint32(users))); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// weights returns the users of every client enrolled as a party of more
// than one user (store.enrol's users); the others answer for one.
func (s *store) weights() (map[uint32]int, error) {
	out := map[uint32]int{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWeight).ForEach(func(k, v []byte) error {
			if len(k) != 4 || len(v) != 4 || binary.BigEndian.Uint32(v) < 2 {
				return fmt.Errorf("%w: party weight record of %d/%d bytes", ErrState, len(k), len(v))
			}
			out[binary.BigEndian.Uint32(k)] = int(binary.BigEndian.Uint32(v))
			return nil
		})
	})
	return out, err
}

var (
	errNoCode    = errors.New("unknown enrolment code")
	errCodeSpent = errors.New("enrolment code already used")
)

// Codes are stored by hash: one byte (0) while unspent, then the client
// id (4 bytes) and its credential hash (32 bytes).

// codeUse returns the client and credential hash a one-time code was
// spent on; ok is false for a code not spent, errNoCode for an unknown one.
func (s *store) codeUse(code [32]byte) (id uint32, cred [32]byte, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCodes).Get(code[:])
		switch len(v) {
		case 0:
			return errNoCode
		case 1: // issued, not spent
		case 36:
			id, cred, ok = binary.BigEndian.Uint32(v), [32]byte(v[4:]), true
		default:
			return fmt.Errorf("%w: enrolment code record of %d bytes", ErrState, len(v))
		}
		return nil
	})
	return id, cred, ok, err
}

// addCodes stores the hashes of new one-time enrolment codes, unspent.
func (s *store) addCodes(hashes [][32]byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCodes)
		for _, h := range hashes {
			if b.Get(h[:]) != nil {
				return errors.New("enrolment code issued twice")
			}
			if err := b.Put(h[:], []byte{0}); err != nil { // one byte: unspent
				return err
			}
		}
		return nil
	})
}

// codeCounts returns how many one-time codes were issued and spent.
func (s *store) codeCounts() (issued, spent int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketCodes).ForEach(func(_, v []byte) error {
			issued++
			if len(v) > 1 {
				spent++
			}
			return nil
		})
	})
	return issued, spent, err
}

// parties returns the party that enrolled each client: "vendor" for the
// shared token (and for clients enrolled before parties were recorded),
// "code:…" for a one-time code.
func (s *store) parties() (map[uint32]string, error) {
	out := map[uint32]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		pb := tx.Bucket(bucketParty)
		return tx.Bucket(bucketEnrol).ForEach(func(k, _ []byte) error {
			p := partyVendor
			if v := pb.Get(k); len(v) > 0 {
				p = string(v)
			}
			if len(k) == 4 {
				out[binary.BigEndian.Uint32(k)] = p
			}
			return nil
		})
	})
	return out, err
}

var errTaken = errors.New("client id already enrolled")

// enrolled returns every enrolled client's credential hash.
func (s *store) enrolled() (map[uint32][32]byte, error) {
	out := map[uint32][32]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEnrol).ForEach(func(k, v []byte) error {
			if len(k) != 4 || len(v) != 32 {
				return fmt.Errorf("%w: enrolment record of %d/%d bytes", ErrState, len(k), len(v))
			}
			out[binary.BigEndian.Uint32(k)] = [32]byte(v)
			return nil
		})
	})
	return out, err
}

// checkpoint is what the store holds of the round loop.
type checkpoint struct {
	Round    int     // next round to broadcast
	Snapshot []byte  // the method server's state, nil before the first commit
	Model    []byte  // the final model, nil until the run is done
	Shares   []int32 // the noise shares per item announced at setup, nil before
}

func (s *store) checkpoint() (checkpoint, error) {
	var c checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketState)
		if r := b.Get(keyRound); r != nil {
			if len(r) != 8 {
				return fmt.Errorf("%w: round record of %d bytes", ErrState, len(r))
			}
			c.Round = int(binary.BigEndian.Uint64(r))
		}
		c.Snapshot = clone(b.Get(keyServer))
		c.Model = clone(b.Get(keyModel))
		if raw := b.Get(keyShares); raw != nil {
			if len(raw)%4 != 0 {
				return fmt.Errorf("%w: shares record of %d bytes", ErrState, len(raw))
			}
			c.Shares = make([]int32, len(raw)/4)
			for k := range c.Shares {
				c.Shares[k] = int32(binary.BigEndian.Uint32(raw[4*k:]))
			}
		}
		return nil
	})
	return c, err
}

// folded returns the ids of the clients whose uploads round folded (for
// a masked round, the clients whose vectors are in its sum), nil when the
// round is not committed.
func (s *store) folded(round int) ([]uint32, error) {
	var out []uint32
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketFolded).Get(u32key(uint32(round)))
		if len(raw)%4 != 0 {
			return fmt.Errorf("%w: folded record of round %d has %d bytes", ErrState, round, len(raw))
		}
		for k := 0; k < len(raw); k += 4 {
			out = append(out, binary.BigEndian.Uint32(raw[k:]))
		}
		return nil
	})
	return out, err
}

// LedgerEntry is the record of one folded round.
type LedgerEntry struct {
	Round int    `json:"round"`
	Phase string `json:"phase"`
	// Enrolled and Participants count the clients asked and the clients
	// that answered (an empty answer counts), in users: a party enrolled
	// for w users (EnrollRequest.users) counts w.
	Enrolled     int `json:"enrolled"`
	Participants int `json:"participants"`
	// Cohort, in a cohort run, counts the clients the round took (the
	// clients asked); Enrolled is then the population.
	Cohort int `json:"cohort,omitempty"`
	// Users counts the distinct users whose uploads the training rounds
	// released so far folded, this one included (a party counts its
	// users): the users the model published after this round reads
	// (continual release, model.Release.Users).
	Users int `json:"users,omitempty"`
	// Parties counts the distinct parties among the enrolled clients
	// (Server.Parties): a vendor's clients, enrolled with the shared
	// token, count as one; so does a vendor enrolled as one party.
	Parties int `json:"parties,omitempty"`
	// Uploads counts the non-empty uploads folded.
	Uploads int `json:"uploads"`
	// Rejected counts the refused uploads of the round by reason.
	Rejected map[string]int `json:"rejected,omitempty"`
	// Coverage is, for a method whose noise is split into shares among the
	// clients (aggregation "sum"), the smallest fraction of an item's
	// shares that arrived among the items that received any upload: 1
	// when nobody dropped out. Below 1 that item's noise is weaker than
	// the method's calibration assumes.
	Coverage float64 `json:"noise_coverage,omitempty"`
	// Eps is the round's ε alone, by the method's accountant, for its
	// unit: with the noise that arrived for a method whose noise is split
	// among the clients (the plain-sum path, protocol.PartialShares at
	// Coverage: HDPMF's family; the integer path, protocol.NoiseCoverage), else the
	// method's own figure (protocol.RoundSpent). It is +Inf (stored as -1)
	// when the noise that arrived bounds nothing, and 0 for rounds that
	// release nothing private or methods that cannot account on the server
	// (DPMF and PDPMF calibrate on the clients' data).
	Eps float64 `json:"eps"`
	// EpsTotal and Delta are the ε at δ spent by every round released so
	// far: composed by the method's own accountant where it accounts on
	// the server (protocol.Spent: Rényi DP on the integer path, the
	// method's ledger for LDP-OP and the SD family), else the rounds' Eps
	// added up (basic composition). It is the run's one privacy figure,
	// which /metrics' privrec_epsilon_spent shows too; -1 from the first
	// round with no finite bound on; 0 when nothing was accounted.
	EpsTotal float64 `json:"eps_total,omitempty"`
	Delta    float64 `json:"delta,omitempty"`
	// Skipped says why a masked round released nothing ("" when it
	// released its sum): its secure aggregation failed after masked
	// vectors were sent, or a restart interrupted it. The method folded
	// an empty round; no ε was spent.
	Skipped string `json:"skipped,omitempty"`
	// Refused says why a masked round's unmasked sum was refused: it was
	// outside the bounds honest clients keep (protocol.ErrOutOfBounds),
	// so one or more clients lied; the method folded an empty round. The
	// sum was unmasked, and the arrival words that bound its noise came
	// from the same lying clients: Eps is -1 (no finite bound).
	Refused string    `json:"refused,omitempty"`
	Seconds float64   `json:"seconds"`
	Time    time.Time `json:"time"`
	// CPUSeconds is the server process's CPU time (user + system) when
	// the round was folded, since the process started: a round's CPU is
	// the difference from the previous entry's of the same process (a
	// smaller figure means a restart). RSSBytes is the process's resident
	// set at the fold, PeakRSSBytes the highest since the process started
	// (a round raised the peak when it exceeds the previous entry's). 0
	// where not measured.
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`
	RSSBytes     int64   `json:"rss_bytes,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
}

// commit stores, in one transaction, the method server's state after
// round e.Round, the ledger entry, and the ids of the uploads folded.
func (s *store) commit(e LedgerEntry, snapshot []byte, folded []uint32, shares []int32) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	ids := make([]byte, 0, 4*len(folded))
	for _, id := range folded {
		ids = binary.BigEndian.AppendUint32(ids, id)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		key := u32key(uint32(e.Round))
		if tx.Bucket(bucketLedger).Get(key) != nil {
			return fmt.Errorf("%w: round %d is already in the ledger", ErrState, e.Round)
		}
		st := tx.Bucket(bucketState)
		if err := st.Put(keyRound, binary.BigEndian.AppendUint64(nil, uint64(e.Round+1))); err != nil {
			return err
		}
		if err := st.Put(keyServer, snapshot); err != nil {
			return err
		}
		if err := tx.Bucket(bucketLedger).Put(key, raw); err != nil {
			return err
		}
		if shares != nil {
			enc := make([]byte, 0, 4*len(shares))
			for _, n := range shares {
				enc = binary.BigEndian.AppendUint32(enc, uint32(n))
			}
			if err := st.Put(keyShares, enc); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMasked).Delete(key); err != nil {
			return err
		}
		return tx.Bucket(bucketFolded).Put(key, ids)
	})
}

// maskedRecord is what the store keeps of a masked round between the
// opening of its masked step and its commit: the session that may have
// taken masked vectors and, once unmasked, the sum and how many vectors
// it holds. A restart that finds a record never opens another session of
// the round: it releases the stored sum, or skips the round.
type maskedRecord struct {
	Session string   `json:"session"`
	Sum     []uint32 `json:"sum,omitempty"`
	// Inputs counts users: a party's vector counts its users.
	Inputs    int      `json:"inputs,omitempty"`
	Survivors []uint32 `json:"survivors,omitempty"` // client ids in the sum
}

// putMasked stores round's masked record, fsynced.
func (s *store) putMasked(round int, r *maskedRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMasked).Put(u32key(uint32(round)), raw) })
}

// masked returns round's masked record, nil when there is none.
func (s *store) masked(round int) (*maskedRecord, error) {
	var r *maskedRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMasked).Get(u32key(uint32(round)))
		if raw == nil {
			return nil
		}
		r = new(maskedRecord)
		if err := json.Unmarshal(raw, r); err != nil {
			return fmt.Errorf("%w: masked record of round %d: %w", ErrState, round, err)
		}
		return nil
	})
	return r, err
}

// putBan records that client id is banned, and why.
func (s *store) putBan(id uint32, why string) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketBans).Put(u32key(id), []byte(why)) })
}

// bans returns the banned clients.
func (s *store) bans() (map[uint32]bool, error) {
	out := map[uint32]bool{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBans).ForEach(func(k, _ []byte) error {
			if len(k) != 4 {
				return fmt.Errorf("%w: ban record key of %d bytes", ErrState, len(k))
			}
			out[binary.BigEndian.Uint32(k)] = true
			return nil
		})
	})
	return out, err
}

// publish stores the final model.
func (s *store) publish(model []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketState).Put(keyModel, model) })
}

// Ledger returns the ledger in round order.
func (s *store) ledger() ([]LedgerEntry, error) {
	var out []LedgerEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLedger).ForEach(func(k, v []byte) error {
			var e LedgerEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("%w: ledger: %w", ErrState, err)
			}
			out = append(out, e)
			return nil
		})
	})
	return out, err
}

// IssueCodes makes n one-time enrolment codes for the state directory
// dir, stores their hashes (never the codes) and returns the codes. It
// opens the state store, so no server may be running on dir: issue codes
// before privrec serve starts, or stop it (it resumes where it was).
func IssueCodes(dir string, n int) ([]string, error) {
	if n < 1 {
		return nil, errors.New("deploy: issue at least one code")
	}
	st, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	codes := make([]string, n)
	hashes := make([][32]byte, n)
	for k := range codes {
		if codes[k], err = NewCode(); err != nil {
			return nil, err
		}
		hashes[k] = hashToken(codes[k])
	}
	if err := st.addCodes(hashes); err != nil {
		return nil, err
	}
	return codes, nil
}

// NewCode returns a fresh one-time enrolment code: CodePrefix and 128
// random bits in base32. The server stores only its SHA-256 (of the
// code's text), which is what ImportCodes takes.
func NewCode() (string, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return CodePrefix + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]), nil
}

// ImportCodes adds to the run in the state directory dir the one-time
// enrolment codes whose SHA-256 hashes are given (codes made elsewhere,
// by an enrolment authority that hands them to devices: privrec
// authority codes), and returns how many were new: a hash already
// imported is skipped, a spent code stays spent. The server never sees
// the codes themselves.
func ImportCodes(dir string, hashes [][32]byte) (int, error) {
	st, err := openStore(dir)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	added := 0
	err = st.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCodes)
		for _, h := range hashes {
			if b.Get(h[:]) != nil {
				continue
			}
			if err := b.Put(h[:], []byte{0}); err != nil { // one byte: unspent
				return err
			}
			added++
		}
		return nil
	})
	return added, err
}

// CodePrefix starts every one-time enrolment code, so that a code pasted
// where the token belongs (or the reverse) is recognised.
const CodePrefix = "prc1-"

// hashToken returns the stored form of a credential secret.
func hashToken(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// sameHash compares hashes in constant time.
func sameHash(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }

// ReadLedger returns the ledger of the state directory dir, read while
// no server holds it.
func ReadLedger(dir string) ([]LedgerEntry, error) {
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err != nil {
		return nil, fmt.Errorf("deploy: %s holds no server state: %w", dir, err)
	}
	st, err := openStore(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.ledger()
}
