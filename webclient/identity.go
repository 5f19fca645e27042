package webclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/privrec/privrec/secagg"
)

// Fetcher reaches the enrolment authority, a service apart from the
// aggregator: one HTTP request of method to an absolute URL, with body
// (nil for a GET) as JSON, returning the HTTP status and body. The page
// uses the browser's fetch (a cross-origin request: the authority must
// allow the page's origin), the tests net/http.
type Fetcher interface {
	Fetch(ctx context.Context, method, url string, body []byte) (status int, resp []byte, err error)
}

// Trust is what the person pins for secagg's active protocol (a server
// that may lie): the enrolment authority's URL and public key, and the
// policy the page holds the server's plans to. The page trusts no other
// source for the key: not the authority's endpoint, not the aggregator.
type Trust struct {
	// AuthorityURL is the authority's base URL ({AuthorityURL}/v1/...).
	AuthorityURL string
	// AuthorityKey is the authority's Ed25519 public key, pinned.
	AuthorityKey ed25519.PublicKey
	// Collusion is the fraction of the certified roster assumed to
	// collude with the server (0: secagg.DefaultCollusion): the plan's K
	// and T must withstand it (secagg.CheckActiveParams).
	Collusion float64
	// MinShare, in (0, 1], is the fraction of the certified roster that
	// must survive a masked round before the page reveals any share, and
	// the largest noise-share fraction (protocol.ParamMinShare) it
	// accepts; 0 means 0.9 (1 − secagg.DefaultDropout), as privrec client's --min-share.
	MinShare float64
	// Fetch reaches the authority.
	Fetch Fetcher
}

// Identity is the device's long-term identity in the active protocol:
// an Ed25519 key drawn on the device (crypto/rand) and the authority's
// certificate of it for the run and the client ID the aggregator gave
// the device. The page keeps it in IndexedDB with its credential.
type Identity struct {
	// Key is the Ed25519 private key (64 bytes; base64 in JSON).
	Key []byte `json:"key"`
	// Cert is the authority's certificate (secagg.Certificate.Marshal),
	// empty until the authority certified the key.
	Cert []byte `json:"cert,omitempty"`
}

// NewIdentity draws a fresh identity key.
func NewIdentity() (*Identity, error) {
	_, priv, err := ed25519.GenerateKey(crand.Reader)
	if err != nil {
		return nil, err
	}
	return &Identity{Key: priv}, nil
}

// public returns the identity's public key.
func (id *Identity) public() (ed25519.PublicKey, error) {
	if id == nil || len(id.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("webclient: no identity key (or one of the wrong size)")
	}
	return ed25519.PrivateKey(id.Key).Public().(ed25519.PublicKey), nil
}

// AllowInsecure lets the page take part, with no enrolment authority
// pinned, in masked rounds of the honest-but-curious protocol, which
// holds only against a server that follows it (a lying one can unmask
// the page). Without it, or Pin, the page refuses every masked round:
// the address's insecure=1, as privrec client's --insecure.
func (c *Client) AllowInsecure() { c.insecure = true }

// Pin sets what the page trusts for the active protocol. With it, the
// page takes part only in active plans; without it, only in the
// honest-but-curious protocol.
func (c *Client) Pin(tr Trust) error {
	switch {
	case len(tr.AuthorityKey) != ed25519.PublicKeySize:
		return fmt.Errorf("webclient: the pinned authority key has %d bytes, want %d", len(tr.AuthorityKey), ed25519.PublicKeySize)
	case !strings.HasPrefix(tr.AuthorityURL, "https://") && !strings.HasPrefix(tr.AuthorityURL, "http://"):
		return fmt.Errorf("webclient: the authority URL %q is not an http(s) URL", tr.AuthorityURL)
	case tr.Fetch == nil:
		return errors.New("webclient: no transport to the authority")
	case tr.Collusion < 0 || tr.Collusion >= 1:
		return fmt.Errorf("webclient: a collusion fraction of %g, outside [0, 1)", tr.Collusion)
	case tr.MinShare < 0 || tr.MinShare > 1:
		return fmt.Errorf("webclient: a minimum share of %g, outside (0, 1]", tr.MinShare)
	}
	if tr.Collusion == 0 {
		tr.Collusion = secagg.DefaultCollusion
	}
	if tr.MinShare == 0 {
		tr.MinShare = 1 - secagg.DefaultDropout // as privrec client's default
	}
	tr.AuthorityURL = strings.TrimRight(tr.AuthorityURL, "/")
	c.trust = &tr
	return nil
}

// ParseAuthorityKey reads a pinned authority key: standard base64 of
// the 32-byte Ed25519 public key, as the authority publishes it.
func ParseAuthorityKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("webclient: the authority key %q is not the standard base64 of a %d-byte Ed25519 key", s, ed25519.PublicKeySize)
	}
	return b, nil
}

// SetIdentity sets the device's identity kept from an earlier enrolment.
// A certificate in it is checked (Certified) against the pinned
// authority and the credential's client ID before the page uses it.
func (c *Client) SetIdentity(id *Identity) error {
	if _, err := id.public(); err != nil {
		return err
	}
	c.ident = &Identity{Key: bytes.Clone(id.Key), Cert: bytes.Clone(id.Cert)}
	c.cert = nil
	if len(id.Cert) == 0 || c.trust == nil || c.cred == "" {
		return nil
	}
	cert, err := c.checkCert(id.Cert)
	if err != nil {
		return err
	}
	c.cert = cert
	return nil
}

// Identity returns the device's identity (nil before Enroll or
// SetIdentity).
func (c *Client) Identity() *Identity {
	if c.ident == nil {
		return nil
	}
	return &Identity{Key: bytes.Clone(c.ident.Key), Cert: bytes.Clone(c.ident.Cert)}
}

// Certified reports whether the page holds a checked certificate.
func (c *Client) Certified() bool { return c.cert != nil }

// checkCert parses a certificate and checks it before use: signed by
// the pinned authority, for the client ID of the page's credential and
// for the page's own identity key, with a run label and a roster.
func (c *Client) checkCert(b []byte) (*secagg.Certificate, error) {
	if c.trust == nil {
		return nil, errors.New("webclient: no authority is pinned")
	}
	cert, err := secagg.ParseCertificate(b)
	if err != nil {
		return nil, err
	}
	if err := cert.Verify(c.trust.AuthorityKey); err != nil {
		return nil, fmt.Errorf("webclient: the certificate: %w", err)
	}
	id, err := c.id()
	if err != nil {
		return nil, err
	}
	pub, err := c.ident.public()
	if err != nil {
		return nil, err
	}
	switch {
	case cert.Client != id:
		return nil, fmt.Errorf("webclient: the certificate is of client %d, this page is client %d: refusing it", cert.Client, id)
	case !bytes.Equal(cert.Key, pub):
		return nil, errors.New("webclient: the certificate is of another identity key: refusing it")
	case cert.Roster < 2 || cert.Run == "":
		return nil, fmt.Errorf("webclient: the certificate names run %q and a roster of %d: refusing it", cert.Run, cert.Roster)
	}
	return cert, nil
}

// authorityInfo is the answer of GET {authority}/v1/authority.
type authorityInfo struct {
	Key    string `json:"key"`
	Run    string `json:"run"`
	Roster int    `json:"roster"`
}

// Certify has the pinned authority certify the device's identity key
// (drawn now if the page has none) for the client ID of its credential,
// with the enrolment code, and keeps the certificate once checked.
// The authority's own report of its key must be the pinned key.
func (c *Client) Certify(ctx context.Context, code string) error {
	if c.trust == nil {
		return errors.New("webclient: no authority is pinned")
	}
	id, err := c.id()
	if err != nil {
		return err
	}
	if c.ident == nil {
		if c.ident, err = NewIdentity(); err != nil {
			return err
		}
	}
	c.cert = nil // until the new certificate is checked
	pub, err := c.ident.public()
	if err != nil {
		return err
	}
	var info authorityInfo
	if err := c.authority(ctx, "GET", "/v1/authority", nil, &info); err != nil {
		return err
	}
	if key, err := ParseAuthorityKey(info.Key); err != nil || !bytes.Equal(key, c.trust.AuthorityKey) {
		return fmt.Errorf("webclient: the authority at %s reports key %q, not the pinned one: refusing it", c.trust.AuthorityURL, info.Key)
	}
	req, _ := json.Marshal(map[string]any{"code": code, "client": id, "key": base64.StdEncoding.EncodeToString(pub)})
	var out struct {
		Certificate string `json:"certificate"`
	}
	if err := c.authority(ctx, "POST", "/v1/certify", req, &out); err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(out.Certificate)
	if err != nil {
		return fmt.Errorf("webclient: the authority's certificate is not base64: %w", err)
	}
	c.ident.Cert = nil
	cert, err := c.checkCert(b)
	if err != nil {
		return err
	}
	if cert.Run != info.Run || int(cert.Roster) != info.Roster {
		return fmt.Errorf("webclient: the certificate is for run %q with a roster of %d, the authority reports run %q with %d: refusing it",
			cert.Run, cert.Roster, info.Run, info.Roster)
	}
	c.ident.Cert, c.cert = b, cert
	return nil
}

// authority makes one call to the authority and decodes its JSON answer.
func (c *Client) authority(ctx context.Context, method, path string, body []byte, out any) error {
	status, resp, err := c.trust.Fetch.Fetch(ctx, method, c.trust.AuthorityURL+path, body)
	if err != nil {
		return fmt.Errorf("webclient: the authority (%s %s): %w", method, path, err)
	}
	if status != 200 {
		msg := strings.TrimSpace(string(resp))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return fmt.Errorf("webclient: the authority answered %s %s with %d: %s", method, path, status, msg)
	}
	if err := json.Unmarshal(resp, out); err != nil {
		return fmt.Errorf("webclient: the authority's answer to %s %s: %w", method, path, err)
	}
	return nil
}
