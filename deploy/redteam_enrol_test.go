package deploy

import (
	"bytes"
	"compress/gzip"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
)

// fieldFlood is an Enroll body of 2 KB or so of gzip: a million empty
// secrets (2 MB of protobuf, under the call's size cap), then a wrong
// token, so that a server that decodes before it checks allocates a
// string header per secret.
func fieldFlood(t testing.TB, secrets int) []byte {
	t.Helper()
	var raw []byte
	for range secrets {
		raw = protowire.AppendTag(raw, 3, protowire.BytesType)
		raw = protowire.AppendVarint(raw, 0)
	}
	raw = protowire.AppendTag(raw, 1, protowire.BytesType)
	raw = protowire.AppendString(raw, "not-the-token")
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	return z.Bytes()
}

// TestRedTeamEnrolFieldFlood is issue 44's attack on Enroll: 100
// concurrent unauthenticated bodies of about 2 KB of gzip, each a million
// empty repeated fields before a wrong token. The server must refuse
// every one without decoding it (the red team measured 38 MB → 1.06 GB
// of resident memory for 20 such bodies), keep its peak resident set
// under 200 MB, and still enrol a client with the token from another
// address after it (before, one shared rate-limit bucket let flooders
// starve every valid enrolment).
func TestRedTeamEnrolFieldFlood(t *testing.T) {
	d, _ := testData(t, 20)
	_, cfg := configure(t, "hdpmf", map[string]string{"epochs": "2"})
	h := startServer(t, ServerConfig{Method: served("hdpmf"), Config: cfg, Catalog: catalogOf(d), StateDir: t.TempDir(),
		MinClients: 1000, EnrollRate: 0.01, EnrollBurst: 10}, "127.0.0.1:0")
	hc, err := HTTPClient(h.ca)
	if err != nil {
		t.Fatal(err)
	}
	bomb := fieldFlood(t, 1_000_000)
	t.Logf("body: %d bytes of gzip", len(bomb))
	// The valid enrolment comes from 127.0.0.2: another source.
	other := &http.Client{Transport: hc.Transport.(*http.Transport).Clone()}
	other.Transport.(*http.Transport).DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext
	api := federationv1connect.NewFederationServiceClient(other, h.url)

	peakRSS := measureRSS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	codes := make([]string, 100)
	errs := make([]error, 100)
	for k := range codes {
		wg.Go(func() {
			_, codes[k], errs[k] = rawCall(ctx, hc, h.url, federationv1connect.FederationServiceEnrollProcedure, "", bomb, true)
		})
	}
	wg.Wait()
	// After the flood, a client with the token enrols from another
	// address: the strangers used none of the enrolments (burst 10, one
	// every 100 s) that callers with a credential share.
	_, valid := api.Enroll(ctx, connect.NewRequest(&fedv1.EnrollRequest{Token: testToken, Secrets: []string{"the-valid-client-secret"}}))
	before, peak, _ := peakRSS()
	refused := map[string]int{}
	for k, c := range codes {
		switch {
		case errs[k] != nil:
			t.Errorf("flood call %d: %v", k, errs[k])
		case c == "unauthenticated" || c == "resource_exhausted" || c == "invalid_argument":
			refused[c]++
		default:
			t.Errorf("flood call %d: %q, want it refused", k, c)
		}
	}
	t.Logf("resident set %.1f MB before, peak %.1f MB; refused %v", float64(before)/1e6, float64(peak)/1e6, refused)
	if peak >= 200<<20 {
		t.Errorf("peak resident set %.1f MB under 100 flooding Enroll bodies, want under 200 MB", float64(peak)/1e6)
	}
	if valid != nil {
		t.Errorf("a valid enrolment from another address after the flood: %v", valid)
	}
}

// FuzzEnrolBody: readEnrol, which reads a stranger's Enroll body before
// anything else does, never panics, and what it lets through decodes as
// an EnrollRequest with a credential and at most maxEnrol secrets of at
// most maxSecret bytes.
func FuzzEnrolBody(f *testing.F) {
	ok := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), testToken)
	ok = protowire.AppendString(protowire.AppendTag(ok, 3, protowire.BytesType), "a-client-secret-0001")
	f.Add(ok)
	f.Add(protowire.AppendVarint(protowire.AppendTag(ok, 5, protowire.VarintType), 2014))  // a party's users
	f.Add(protowire.AppendVarint(protowire.AppendTag(ok, 5, protowire.VarintType), 1<<40)) // too many
	f.Add([]byte{0x1a, 0x00, 0x1a, 0x00, 0x1a, 0x00, 0x0a, 0x01, 'x'})
	f.Add([]byte{0x22, 0x05, 'c', 'o', 'd', 'e', '!'})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	st, err := openStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	s := &Server{st: st, tok: hashToken(testToken)}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := s.readEnrol(bytes.NewReader(body), enrolBytes)
		if err != nil {
			return
		}
		var req fedv1.EnrollRequest
		if err := proto.Unmarshal(out, &req); err != nil {
			t.Fatalf("readEnrol let through what does not decode: %v", err)
		}
		if req.GetToken() == "" && req.GetCode() == "" {
			t.Fatal("readEnrol let through a call without a credential")
		}
		if len(req.GetSecrets()) > maxEnrol {
			t.Fatalf("%d secrets", len(req.GetSecrets()))
		}
		for _, sec := range req.GetSecrets() {
			if len(sec) > maxSecret {
				t.Fatalf("a secret of %d bytes", len(sec))
			}
		}
	})
}
