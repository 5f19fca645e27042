package deploy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
)

// Enroll is the one call a stranger may make with a body, so its body is
// read before anything is decoded, and the credential is checked as soon
// as it arrives:
//
//   - A protobuf body is read as a stream (after gunzip, if compressed)
//     and decoded field by field: at most maxEnrol secrets of at most
//     maxSecret bytes, one token or code of at most maxCredential bytes;
//     a token is checked the moment it is read, a code too; a body whose
//     third secret comes before a valid credential is refused (an honest
//     vendor's client writes the token first, and a code enrols one
//     client; two are let through so that a code sent with two secrets
//     gets its own error). No more than two secrets are held for a caller
//     whose credential is not known yet, so a stranger's body costs a
//     buffer, not its decoded size. The request is then re-encoded for the
//     handler, which decodes at most what was checked.
//   - A JSON body (the browser's: a code and at most one secret) is
//     capped at smallBytes.
//   - Other encodings (gRPC, streaming) are refused: privrec's clients
//     use the Connect protocol's unary POST.
//
// A source address whose enrolments fail is limited (failBucket): after
// a burst of failures its calls are refused before their bodies are
// read, while other addresses enrol as before; the shared bucket
// (ServerConfig.EnrollRate) counts only calls whose credential holds.
const (
	maxSecret     = 256
	maxCredential = 1024
	// failRate and failBurst limit one address's failed enrolments.
	failRate  = 0.5
	failBurst = 20
)

// errNoCredential is why a body that sends secrets before its
// credential is refused.
var errNoCredential = errors.New("enrolment: no valid token or code before the secrets (send the token first)")

// readEnrol reads and checks an Enroll call's protobuf body from body
// (at most limit bytes decompressed) and returns it re-encoded.
func (s *Server) readEnrol(body io.Reader, limit int64) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(body, limit+1))
	var (
		req    fedv1.EnrollRequest
		authed bool
		read   int64
	)
	uvarint := func() (uint64, error) {
		v, err := binary.ReadUvarint(br)
		read += int64(protowire.SizeVarint(v))
		return v, err
	}
	bytesField := func(max int, what string) ([]byte, error) {
		n, err := uvarint()
		if err != nil {
			return nil, err
		}
		if n > uint64(max) {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("enrolment: a %s of %d bytes; at most %d", what, n, max))
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		read += int64(n)
		return b, nil
	}
	for {
		tag, err := uvarint()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, malformed(err)
		}
		num, typ := protowire.DecodeTag(tag)
		switch {
		case (num == 1 || num == 4) && typ == protowire.BytesType:
			b, err := bytesField(maxCredential, "credential")
			if err != nil {
				return nil, malformed(err)
			}
			if req.Token != "" || req.Code != "" {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("enrolment: two credentials in one call"))
			}
			if num == 1 {
				req.Token = string(b)
				if !sameHash(hashToken(req.Token), s.tok) {
					return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("wrong enrolment token"))
				}
			} else {
				req.Code = string(b)
				if _, _, _, err := s.st.codeUse(hashToken(req.Code)); errors.Is(err, errNoCode) {
					return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown enrolment code"))
				}
			}
			authed = true
		case num == 3 && typ == protowire.BytesType:
			if len(req.Secrets) >= 2 && !authed {
				return nil, connect.NewError(connect.CodeUnauthenticated, errNoCredential)
			}
			if len(req.Secrets) >= maxEnrol {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("more than %d clients in one call", maxEnrol))
			}
			b, err := bytesField(maxSecret, "secret")
			if err != nil {
				return nil, malformed(err)
			}
			req.Secrets = append(req.Secrets, string(b))
		case num == 5 && typ == protowire.VarintType:
			// The users a party answers for (EnrollRequest.users).
			v, err := uvarint()
			if err != nil {
				return nil, malformed(err)
			}
			if v > math.MaxUint32 {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("enrolment: a party of %d users", v))
			}
			req.Users = uint32(v)
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("enrolment: field %d of wire type %d is not part of an EnrollRequest", num, typ))
		}
		if read > limit {
			return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("a request of more than %d bytes; this call takes at most %d", limit, limit))
		}
	}
	if !authed {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("enrolment: no token or code"))
	}
	return proto.Marshal(&req)
}

// malformed wraps a read error of an Enroll body.
func malformed(err error) error {
	var ce *connect.Error
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &ce):
		return err
	case errors.As(err, &mb):
		return connect.NewError(connect.CodeResourceExhausted, err)
	}
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("enrolment: a malformed body: %w", err))
}

// gateEnrol prepares r, an Enroll call, for the handler (see readEnrol):
// a nil error leaves r's body checked and re-encoded.
func (g *gate) gateEnrol(r *http.Request, limit int64) error {
	ct := r.Header.Get("Content-Type")
	switch {
	case r.Method != http.MethodPost:
		return connect.NewError(connect.CodeUnimplemented, errors.New("Enroll takes a POST"))
	case ct == "application/json": // capped at smallBytes (gate.ServeHTTP)
		return inflate(r, limit)
	case ct != "application/proto":
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("Enroll takes the Connect protocol's unary POST (application/proto or application/json), not %q", ct))
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("gzip body: %w", err))
		}
		body = zr
	}
	b, err := g.s.readEnrol(body, limit)
	if err != nil {
		return err
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	r.Header.Del("Content-Encoding")
	r.Header.Set("Content-Length", fmt.Sprint(len(b)))
	return nil
}

// failBucket limits the failed enrolments of each source address: burst
// failures, then one every 1/rate seconds. It forgets every address when
// it holds maxSources (a flood of spoofed addresses cannot grow it
// without bound; TCP sources cannot be spoofed cheaply).
type failBucket struct {
	mu      sync.Mutex
	rate    float64
	burst   int
	sources map[string]*bucket
}

const maxSources = 1 << 16

func newFailBucket(rate float64, burst int) *failBucket {
	return &failBucket{rate: rate, burst: burst, sources: map[string]*bucket{}}
}

// frontHeader carries a front-end's secret (FrontConfig.Token) on the
// calls it passes on.
const frontHeader = "X-Privrec-Front"

// source is the address r is counted by, without its port: the
// connection's, or, for a call a front-end passed on with the run's
// front token (not empty), the caller's address the front-end
// forwarded in X-Forwarded-For (the front-end replaces whatever the
// caller sent there).
func source(r *http.Request, frontToken string) string {
	if frontToken != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(frontHeader)), []byte(frontToken)) == 1 {
		if ip := net.ParseIP(strings.TrimSpace(r.Header.Get("X-Forwarded-For"))); ip != nil {
			if v4 := ip.To4(); v4 != nil {
				return v4.String()
			}
			return ip.String()
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return strings.TrimPrefix(host, "::ffff:")
}

// allowed reports whether src may try to enrol now (it has failures
// left), without using one.
func (f *failBucket) allowed(src string, now time.Time) bool {
	f.mu.Lock()
	b := f.sources[src]
	f.mu.Unlock()
	return b == nil || b.peek(now) >= 1
}

// fail uses one of src's failures.
func (f *failBucket) fail(src string, now time.Time) {
	f.mu.Lock()
	b := f.sources[src]
	if b == nil {
		if len(f.sources) >= maxSources {
			clear(f.sources)
		}
		b = newBucket(f.rate, f.burst)
		f.sources[src] = b
	}
	f.mu.Unlock()
	b.allow(now)
}
