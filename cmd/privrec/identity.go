package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/privrec/privrec/authority"
	"github.com/privrec/privrec/deploy"
	"github.com/privrec/privrec/internal/atomicfile"
	"github.com/privrec/privrec/protocol"
	"github.com/privrec/privrec/secagg"
)

// identityFlags are client --identity, --authority-url and
// --authority-ca: clients whose identity keys the authority certifies,
// the authority keeping its key.
type identityFlags struct {
	dir, url, ca string
	code         string            // the device's enrolment code (--authority-url)
	pinned       ed25519.PublicKey // --authority-key
	run          string            // --run
	roster       int               // --roster (0: the certificates')
	stateDir     string            // --state, required
}

// Files of client --identity DIR.
const (
	identitiesFile   = "identities.json"
	requestsFile     = "requests.txt"
	certificatesFile = "certificates.txt"
)

// identitiesDoc is DIR/identities.json (mode 0600): each client's
// identity key seed, by client ID, for one plan.
type identitiesDoc struct {
	Plan string            `json:"plan"`
	Keys map[string]string `json:"keys"` // client ID → base64 Ed25519 seed
}

// check refuses a flag set the identity flow cannot run with.
func (f *identityFlags) check() error {
	switch {
	case f.dir == "":
		if f.url != "" || f.ca != "" {
			return errors.New("--authority-url and --authority-ca need --identity DIR")
		}
		return nil
	case f.pinned == nil:
		return errors.New("--identity: pin the authority with --authority-key (its public key): the certificates are checked against it")
	case f.stateDir == "":
		return errors.New("--identity: give --state DIR too: a second run must enrol as the same client IDs the certificates name")
	case f.run == "":
		return errors.New("--identity: give --run, the run label the authority certifies for")
	case f.url != "" && f.code == "":
		return errors.New("--authority-url: the service certifies one identity per enrolment code: use it with --code (a vendor's users are certified in a batch: leave out --authority-url)")
	}
	return nil
}

// identify enrols the session's clients and sets their certified
// identities. Without --authority-url, a first run draws the identity
// keys, writes DIR/requests.txt and returns stop (the authority certifies
// them offline); a second run reads DIR/certificates.txt. With it, the
// device asks the authority's service itself.
func (a *app) identify(ctx context.Context, sess *deploy.Session, list []protocol.Client, f *identityFlags) (stop bool, err error) {
	ids, err := sess.Enrol(ctx, list)
	if err != nil {
		return false, err
	}
	keys, err := loadIdentities(f.dir, sess.PlanDigest(), ids)
	if err != nil {
		return false, err
	}
	certs := map[uint32]*secagg.Certificate{}
	certPath := filepath.Join(f.dir, certificatesFile)
	switch {
	case f.url != "":
		hc, err := deploy.HTTPClient(f.ca)
		if err != nil {
			return false, err
		}
		if err := checkService(ctx, hc, f.url, f.pinned, f.run); err != nil {
			return false, err
		}
		var lines []string
		for _, id := range ids {
			c, err := authority.Request(ctx, hc, f.url, f.code, id, keys[id].Public().(ed25519.PublicKey))
			if err != nil {
				return false, fmt.Errorf("--authority-url: certifying client %d: %w", id, err)
			}
			certs[id] = c
			lines = append(lines, base64.StdEncoding.EncodeToString(c.Marshal()))
		}
		if err := atomicfile.WriteFile(certPath, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return false, err
		}
	default:
		raw, err := os.ReadFile(certPath)
		if errors.Is(err, fs.ErrNotExist) {
			return true, a.writeRequests(f, ids, keys)
		}
		if err != nil {
			return false, err
		}
		if certs, err = parseCertificates(certPath, raw); err != nil {
			return false, err
		}
	}
	out := make(map[uint32]deploy.Identity, len(ids))
	for _, id := range ids {
		c, ok := certs[id]
		if !ok {
			return false, fmt.Errorf("%s holds no certificate for client %d (the ID the server enrolled it as): have the authority certify %s again", certPath, id, filepath.Join(f.dir, requestsFile))
		}
		idn := deploy.Identity{Key: keys[id], Cert: c}
		if err := deploy.CheckIdentity(f.pinned, f.run, uint32(max(f.roster, 0)), id, idn); err != nil {
			return false, fmt.Errorf("%s: %w", certPath, err)
		}
		out[id] = idn
	}
	return false, sess.UseIdentities(out)
}

// checkService refuses an authority service at url whose key is not the
// pinned one (the key it reports is never trusted by itself) or that
// certifies for another run.
func checkService(ctx context.Context, hc *http.Client, url string, pinned ed25519.PublicKey, run string) error {
	info, pub, err := authority.Fetch(ctx, hc, url)
	if err != nil {
		return fmt.Errorf("--authority-url: %w", err)
	}
	if !pub.Equal(pinned) {
		return fmt.Errorf("--authority-url %s reports authority key %s, and --authority-key pins %s: refusing (the key a service reports is never trusted by itself)",
			url, info.Key, base64.StdEncoding.EncodeToString(pinned))
	}
	if info.Run != run {
		return fmt.Errorf("--authority-url %s certifies for run %q, and --run is %q: refusing", url, info.Run, run)
	}
	return nil
}

// writeRequests writes DIR/requests.txt and says what to run.
func (a *app) writeRequests(f *identityFlags, ids []uint32, keys map[uint32]ed25519.PrivateKey) error {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%d %s\n", id, base64.StdEncoding.EncodeToString(keys[id].Public().(ed25519.PublicKey)))
	}
	req := filepath.Join(f.dir, requestsFile)
	if err := atomicfile.WriteFile(req, []byte(b.String()), 0o644); err != nil {
		return err
	}
	roster := "N"
	if f.roster > 0 {
		roster = strconv.Itoa(f.roster)
	}
	fmt.Fprintf(a.stdout, "enrolled %d clients and drew their identity keys (%s); the authority now certifies them:\n\n"+
		"  privrec authority certify --key authority.key --run %s --roster %s --batch %s --ledger certified.txt > %s\n\n"+
		"then run this same command again (same --state and --identity): it enrols as the same client IDs and takes part.\n",
		len(ids), filepath.Join(f.dir, identitiesFile), shellQuote(f.run), roster, req, filepath.Join(f.dir, certificatesFile))
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// loadIdentities returns an identity key for every client ID of ids:
// those in DIR/identities.json, and fresh ones for the others, written
// (mode 0600) before they are returned.
func loadIdentities(dir, plan string, ids []uint32) (map[uint32]ed25519.PrivateKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, identitiesFile)
	doc := identitiesDoc{Plan: plan, Keys: map[string]string{}}
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if doc.Plan != plan {
			return nil, fmt.Errorf("%s holds the identities of another plan (%s, this run's is %s): give another --identity", path, doc.Plan, plan)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	out := make(map[uint32]ed25519.PrivateKey, len(ids))
	fresh := false
	for _, id := range ids {
		k := strconv.FormatUint(uint64(id), 10)
		if s, ok := doc.Keys[k]; ok {
			seed, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(seed) != ed25519.SeedSize {
				return nil, fmt.Errorf("%s: field keys.%s: want the base64 seed of an Ed25519 key", path, k)
			}
			out[id] = ed25519.NewKeyFromSeed(seed)
			continue
		}
		var seed [ed25519.SeedSize]byte
		if _, err := rand.Read(seed[:]); err != nil {
			return nil, err
		}
		doc.Keys[k] = base64.StdEncoding.EncodeToString(seed[:])
		out[id] = ed25519.NewKeyFromSeed(seed[:])
		fresh = true
	}
	if fresh {
		raw, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(path, raw, 0o600); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseCertificates reads a certificates file: one base64 certificate
// (secagg.Certificate.Marshal) a line, by the client ID it names.
func parseCertificates(path string, raw []byte) (map[uint32]*secagg.Certificate, error) {
	out := map[uint32]*secagg.Certificate{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not base64: %w", path, n, err)
		}
		c, err := secagg.ParseCertificate(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if _, dup := out[c.Client]; dup {
			return nil, fmt.Errorf("%s:%d: a second certificate for client %d", path, n, c.Client)
		}
		out[c.Client] = c
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// parseRequests reads a requests file of client --identity: one
// "client-ID base64-public-key" a line.
func parseRequests(path string) ([]uint32, []ed25519.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var ids []uint32
	var keys []ed25519.PublicKey
	seen := map[uint32]bool{}
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 2 {
			return nil, nil, fmt.Errorf("%s:%d: %d fields, want 2 (client ID, base64 public key)", path, n+1, len(fs))
		}
		id, err := strconv.ParseUint(fs[0], 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: client ID %q: %w", path, n+1, fs[0], err)
		}
		key, err := authority.ParseKey(fs[1])
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
		if seen[uint32(id)] {
			return nil, nil, fmt.Errorf("%s:%d: client %d asked for twice", path, n+1, id)
		}
		seen[uint32(id)] = true
		ids, keys = append(ids, uint32(id)), append(keys, key)
	}
	return ids, keys, nil
}
