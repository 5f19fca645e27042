package authority

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Refusals of the authority. The Service answers them with 403
// (ErrUnknownCode, ErrCodeUsed), 409 (ErrClientHasKey) and 400
// (ErrMalformed).
var (
	ErrUnknownCode  = errors.New("authority: unknown enrolment code")
	ErrCodeUsed     = errors.New("authority: enrolment code already used for another identity")
	ErrClientHasKey = errors.New("authority: another identity key is already certified for this client ID")
	ErrMalformed    = errors.New("authority: malformed request")
)

// Ledger is the authority's append-only record of the identities it
// certified: one identity key per client ID and one identity per
// enrolment code, ever. Each record is synced to disk before Record
// returns. It is safe for concurrent use, and for use by several
// processes at once (the service and a batch certification): Record
// holds an exclusive lock on the file and first reads what others
// appended.
type Ledger struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	size  int64                // bytes read so far
	lines int                  // lines read so far
	keys  map[uint32]string    // client ID → base64 key certified
	codes map[[32]byte]codeUse // code hash → the identity it certified
}

type codeUse struct {
	client uint32
	key    string
}

// OpenLedger opens (creating it, mode 0600) the ledger file at path and
// reads its records. A last line without its newline (a crash in the
// middle of an append, which was never answered) is cut off.
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("authority: ledger: %w", err)
	}
	l := &Ledger{path: path, f: f, keys: map[uint32]string{}, codes: map[[32]byte]codeUse{}}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("authority: ledger %s: %w", path, err)
	}
	err = l.catchUp()
	unlockFile(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// catchUp reads the records appended since the last read (by this
// process or another); the file is locked.
func (l *Ledger) catchUp() error {
	st, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("authority: ledger %s: %w", l.path, err)
	}
	if st.Size() == l.size {
		return nil
	}
	if st.Size() < l.size {
		return fmt.Errorf("authority: ledger %s shrank from %d to %d bytes: refusing to go on", l.path, l.size, st.Size())
	}
	raw := make([]byte, st.Size()-l.size)
	if _, err := l.f.ReadAt(raw, l.size); err != nil {
		return fmt.Errorf("authority: ledger %s: %w", l.path, err)
	}
	if end := bytes.LastIndexByte(raw, '\n') + 1; end < len(raw) {
		if err := l.f.Truncate(l.size + int64(end)); err != nil {
			return fmt.Errorf("authority: ledger %s: cutting a torn last line: %w", l.path, err)
		}
		raw = raw[:end]
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		l.lines++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		code, client, key, err := parseRecord(line)
		if err != nil {
			return fmt.Errorf("authority: ledger %s:%d: %w", l.path, l.lines, err)
		}
		if k, ok := l.keys[client]; ok && k != key {
			return fmt.Errorf("authority: ledger %s:%d: a second key for client %d", l.path, l.lines, client)
		}
		l.keys[client] = key
		if code != nil {
			l.codes[*code] = codeUse{client, key}
		}
	}
	l.size += int64(len(raw))
	return nil
}

// parseRecord reads one ledger line.
func parseRecord(line string) (*[32]byte, uint32, string, error) {
	fs := strings.Fields(line)
	if len(fs) != 3 {
		return nil, 0, "", fmt.Errorf("%d fields, want 3 (code hash or -, client ID, key)", len(fs))
	}
	var code *[32]byte
	if fs[0] != "-" {
		h, err := ParseCodeHash(fs[0])
		if err != nil {
			return nil, 0, "", err
		}
		code = &h
	}
	c, err := strconv.ParseUint(fs[1], 10, 32)
	if err != nil {
		return nil, 0, "", fmt.Errorf("client ID %q: %w", fs[1], err)
	}
	if _, err := ParseKey(fs[2]); err != nil {
		return nil, 0, "", err
	}
	return code, uint32(c), fs[2], nil
}

// Record records that key is certified as client's identity, asked for
// with the enrolment code of hash code (nil for a batch, where the
// authority's operator vouches for the request). It refuses a code that
// certified another identity (ErrCodeUsed) and a client ID that has
// another key (ErrClientHasKey); the same identity asked for again (a
// retry whose answer was lost) is no new record. The record is on disk
// before Record returns.
func (l *Ledger) Record(code *[32]byte, client uint32, key ed25519.PublicKey) error {
	if len(key) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: the identity key has %d bytes, want %d", ErrMalformed, len(key), ed25519.PublicKeySize)
	}
	k := base64.StdEncoding.EncodeToString(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("authority: the ledger is closed")
	}
	if err := lockFile(l.f); err != nil {
		return fmt.Errorf("authority: ledger %s: %w", l.path, err)
	}
	defer unlockFile(l.f)
	if err := l.catchUp(); err != nil {
		return err
	}
	if code != nil {
		if u, ok := l.codes[*code]; ok {
			if u.client == client && u.key == k {
				return nil
			}
			return ErrCodeUsed
		}
	}
	old, had := l.keys[client]
	if had && old != k {
		return fmt.Errorf("%w (client %d)", ErrClientHasKey, client)
	}
	if had && code == nil {
		return nil
	}
	codeText := "-"
	if code != nil {
		codeText = hex.EncodeToString(code[:])
	}
	line := fmt.Sprintf("%s %d %s\n", codeText, client, k)
	if _, err := l.f.WriteString(line); err != nil {
		return fmt.Errorf("authority: ledger %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("authority: ledger %s: %w", l.path, err)
	}
	l.size += int64(len(line))
	l.lines++
	l.keys[client] = k
	if code != nil {
		l.codes[*code] = codeUse{client, k}
	}
	return nil
}

// Len returns the number of client IDs with a certified key.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}

// Close closes the ledger file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// HashCode returns the SHA-256 of an enrolment code's text: what the
// aggregator stores (privrec enroll-codes --import) and the authority
// checks.
func HashCode(code string) [32]byte { return sha256.Sum256([]byte(code)) }

// ParseCodeHash reads a code hash written as 64 hex digits.
func ParseCodeHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("code hash %q: want 64 hex digits (a SHA-256)", s)
	}
	copy(h[:], b)
	return h, nil
}

// ParseKey reads an Ed25519 public key in standard base64.
func ParseKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("key %q: want a base64 Ed25519 public key", s)
	}
	return b, nil
}

// ReadCodeHashes reads a code-hash file of privrec authority codes: one
// SHA-256 in hex a line (blank lines and # comments skipped). An error
// names the file and line.
func ReadCodeHashes(path string) ([][32]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][32]byte
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		h, err := ParseCodeHash(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no code hash", path)
	}
	return out, nil
}
