package authority

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/privrec/privrec/secagg"
)

// MaxBody caps a request's body, and an answer's the client reads.
const MaxBody = 4 << 10

// Config configures a Service.
type Config struct {
	// Key is the authority's private key; Run the run label and Roster
	// the number of clients its certificates are for (client IDs below
	// it).
	Key    ed25519.PrivateKey
	Run    string
	Roster uint32
	// Codes holds the SHA-256 hashes of the enrolment codes that may ask
	// for a certificate (HashCode).
	Codes [][32]byte
	// Ledger records every identity certified; required.
	Ledger *Ledger
	// AllowOrigin, when not empty, is the one web page origin (e.g.
	// https://app.example) whose scripts may call the service (CORS).
	AllowOrigin string
	// Rate and Burst bound the certifications the service makes per
	// second, over all callers with a valid code (429 beyond); 0 means 20
	// and 40. A request whose code is unknown or spent is limited per
	// source address instead (failBurst, then one every failEvery), so
	// strangers guessing codes do not starve the devices that hold one.
	Rate, Burst float64
}

// Info is the answer of GET /v1/authority.
type Info struct {
	Key    string `json:"key"`
	Run    string `json:"run"`
	Roster uint32 `json:"roster"`
}

// certifyRequest is the body of POST /v1/certify.
type certifyRequest struct {
	Code   string `json:"code"`
	Client uint32 `json:"client"`
	Key    string `json:"key"`
}

// certifyResponse is its answer.
type certifyResponse struct {
	Certificate string `json:"certificate"`
}

// Service is the authority's HTTP API (an http.Handler): see the package
// documentation.
type Service struct {
	cfg   Config
	codes map[[32]byte]bool
	info  []byte

	mu     sync.Mutex
	tokens float64
	last   time.Time
	fails  map[string]*failBucket // by source address
}

// The per-source limit on refused codes.
const (
	failBurst = 20
	failEvery = 2 * time.Second
	maxSource = 100_000 // sources remembered; past it the oldest are forgotten
)

// failBucket is one source address's allowance of refused codes.
type failBucket struct {
	tokens float64
	last   time.Time
}

// New returns the service of cfg.
func New(cfg Config) (*Service, error) {
	switch {
	case len(cfg.Key) != ed25519.PrivateKeySize:
		return nil, errors.New("authority: no Ed25519 private key")
	case cfg.Roster == 0:
		return nil, errors.New("authority: the roster is 0: give the number of clients of the run")
	case cfg.Ledger == nil:
		return nil, errors.New("authority: no ledger")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 20
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 2 * cfg.Rate
	}
	s := &Service{cfg: cfg, codes: make(map[[32]byte]bool, len(cfg.Codes)), tokens: cfg.Burst, last: time.Now()}
	for _, h := range cfg.Codes {
		s.codes[h] = true
	}
	info, err := json.Marshal(Info{Key: base64.StdEncoding.EncodeToString(cfg.Key.Public().(ed25519.PublicKey)), Run: cfg.Run, Roster: cfg.Roster})
	if err != nil {
		return nil, err
	}
	s.info = info
	return s, nil
}

// Certify checks and records a request for a certificate of key as
// client, with the enrolment code code, and returns the certificate: the
// ledger is on disk before it returns.
func (s *Service) Certify(code string, client uint32, key ed25519.PublicKey) (*secagg.Certificate, error) {
	if code == "" || len(code) > 256 {
		return nil, fmt.Errorf("%w: no enrolment code", ErrMalformed)
	}
	if client >= s.cfg.Roster {
		return nil, fmt.Errorf("%w: client %d is outside the roster of %d", ErrMalformed, client, s.cfg.Roster)
	}
	h := HashCode(code)
	if !s.codes[h] {
		return nil, ErrUnknownCode
	}
	if err := s.cfg.Ledger.Record(&h, client, key); err != nil {
		return nil, err
	}
	return secagg.Certify(s.cfg.Key, s.cfg.Run, client, s.cfg.Roster, key), nil
}

// ServeHTTP serves the API.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if o := r.Header.Get("Origin"); o != "" && s.cfg.AllowOrigin != "" && o == s.cfg.AllowOrigin {
		h.Set("Access-Control-Allow-Origin", o)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	switch r.URL.Path {
	case "/v1/authority":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			refuse(w, http.StatusMethodNotAllowed, "GET only")
			return
		}
		h.Set("Content-Type", "application/json")
		w.Write(s.info)
	case "/v1/certify":
		if r.Method != http.MethodPost {
			refuse(w, http.StatusMethodNotAllowed, "POST only")
			return
		}
		src := source(r)
		if !s.mayFail(src, false) {
			h.Set("Retry-After", fmt.Sprint(int(failEvery.Seconds())))
			refuse(w, http.StatusTooManyRequests, "rate limited: too many refused codes from this address")
			return
		}
		s.certify(w, r, src)
	default:
		refuse(w, http.StatusNotFound, "no such endpoint: /v1/authority, /v1/certify")
	}
}

// certify answers POST /v1/certify.
func (s *Service) certify(w http.ResponseWriter, r *http.Request, src string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		refuse(w, http.StatusBadRequest, "malformed request: want Content-Type application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("malformed request: the body is over %d bytes or unreadable", MaxBody))
		return
	}
	var req certifyRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("malformed request: want {\"code\", \"client\", \"key\"}: %v", err))
		return
	}
	key, err := ParseKey(req.Key)
	if err != nil {
		refuse(w, http.StatusBadRequest, "malformed request: field key: want a base64 Ed25519 public key")
		return
	}
	if !s.knownCode(req.Code) && req.Code != "" && len(req.Code) <= 256 && req.Client < s.cfg.Roster {
		s.mayFail(src, true)
		refuse(w, http.StatusForbidden, ErrUnknownCode.Error())
		return
	}
	if !s.allow() {
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusTooManyRequests, "rate limited: try again in a second")
		return
	}
	c, err := s.Certify(req.Code, req.Client, key)
	switch {
	case errors.Is(err, ErrUnknownCode), errors.Is(err, ErrCodeUsed):
		s.mayFail(src, true)
		refuse(w, http.StatusForbidden, err.Error())
		return
	case errors.Is(err, ErrClientHasKey):
		refuse(w, http.StatusConflict, err.Error())
		return
	case errors.Is(err, ErrMalformed):
		refuse(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		refuse(w, http.StatusInternalServerError, "the authority could not record the certificate")
		return
	}
	out, _ := json.Marshal(certifyResponse{Certificate: base64.StdEncoding.EncodeToString(c.Marshal())})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// knownCode reports whether code is one of the run's codes (spent or
// not): the cheap check before a well-formed request may take a token
// of the shared limit.
func (s *Service) knownCode(code string) bool {
	return s.codes[HashCode(code)]
}

// source is the request's source address, without its port.
func source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// mayFail reports whether source src may still send a refused code;
// with take, it counts one.
func (s *Service) mayFail(src string, take bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	b := s.fails[src]
	if b == nil {
		if !take {
			return true
		}
		if s.fails == nil || len(s.fails) >= maxSource {
			s.fails = map[string]*failBucket{} // forget them all rather than grow
		}
		b = &failBucket{tokens: failBurst, last: now}
		s.fails[src] = b
	}
	b.tokens = min(failBurst, b.tokens+now.Sub(b.last).Seconds()/failEvery.Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	if take {
		b.tokens--
	}
	return true
}

// allow takes a token of the rate limit.
func (s *Service) allow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.tokens = min(s.cfg.Burst, s.tokens+now.Sub(s.last).Seconds()*s.cfg.Rate)
	s.last = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// refuse writes a text/plain refusal.
func refuse(w http.ResponseWriter, status int, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, reason+"\n")
}

// Fetch reads the authority's public description (GET /v1/authority) at
// base (e.g. https://authority.example:7443).
func Fetch(ctx context.Context, hc *http.Client, base string) (Info, ed25519.PublicKey, error) {
	var info Info
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/authority", nil)
	if err != nil {
		return info, nil, err
	}
	body, err := do(hc, req)
	if err != nil {
		return info, nil, err
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return info, nil, fmt.Errorf("authority %s: %w", base, err)
	}
	pub, err := ParseKey(info.Key)
	if err != nil {
		return info, nil, fmt.Errorf("authority %s: %w", base, err)
	}
	return info, pub, nil
}

// Request asks the authority at base to certify key as client's identity
// with the enrolment code code (POST /v1/certify) and returns the
// certificate, parsed and not verified: the caller checks it against the
// authority key it pins.
func Request(ctx context.Context, hc *http.Client, base, code string, client uint32, key ed25519.PublicKey) (*secagg.Certificate, error) {
	body, _ := json.Marshal(certifyRequest{Code: code, Client: client, Key: base64.StdEncoding.EncodeToString(key)})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/certify", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	out, err := do(hc, req)
	if err != nil {
		return nil, err
	}
	var resp certifyResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("authority %s: %w", base, err)
	}
	raw, err := base64.StdEncoding.DecodeString(resp.Certificate)
	if err != nil {
		return nil, fmt.Errorf("authority %s: the certificate is not base64: %w", base, err)
	}
	return secagg.ParseCertificate(raw)
}

// StatusError is a refusal of the authority: its HTTP status and reason.
type StatusError struct {
	Status int
	Reason string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("authority: %d %s: %s", e.Status, http.StatusText(e.Status), e.Reason)
}

// do sends req and returns the body of a 200 answer (at most MaxBody).
func do(hc *http.Client, req *http.Request) ([]byte, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("authority %s: an answer over %d bytes", req.URL.Host, MaxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{Status: resp.StatusCode, Reason: strings.TrimSpace(string(body))}
	}
	return body, nil
}
