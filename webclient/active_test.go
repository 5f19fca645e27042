package webclient_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/deploy/deploytest"
	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/webclient"
)

// httpFetcher is the tests' Fetcher to the authority: net/http, where the
// page uses the browser's fetch.
type httpFetcher struct{}

func (httpFetcher) Fetch(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// fakeAuthority is the enrolment authority's HTTP API, as package
// authority serves it, built from secagg.Certify: GET /v1/authority
// reports report (the signing key's public key unless set), run and
// roster; POST /v1/certify certifies the key sent, once per code, for
// the client ID sent (or for client(id) when set) with key.
type fakeAuthority struct {
	key    ed25519.PrivateKey
	report ed25519.PublicKey
	run    string
	roster int
	client func(uint32) uint32
	other  ed25519.PublicKey // when set, the key certified instead of the one sent
	// reportRoster, when set, is the roster GET /v1/authority reports
	// (the certificates say roster).
	reportRoster int
	URL          string

	mu    *sync.Mutex
	spent map[string]bool
}

func newFakeAuthority(t *testing.T, a *fakeAuthority) *fakeAuthority {
	if a.report == nil {
		a.report = a.key.Public().(ed25519.PublicKey)
	}
	a.spent, a.mu = map[string]bool{}, &sync.Mutex{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/authority", func(w http.ResponseWriter, r *http.Request) {
		roster := a.roster
		if a.reportRoster != 0 {
			roster = a.reportRoster
		}
		json.NewEncoder(w).Encode(map[string]any{"key": base64.StdEncoding.EncodeToString(a.report), "run": a.run, "roster": roster})
	})
	mux.HandleFunc("POST /v1/certify", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Code   string `json:"code"`
			Client uint32 `json:"client"`
			Key    string `json:"key"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		key, err := base64.StdEncoding.DecodeString(req.Key)
		if err != nil || len(key) != ed25519.PublicKeySize || req.Code == "" {
			http.Error(w, "bad key or code", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		spent := a.spent[req.Code]
		a.spent[req.Code] = true
		a.mu.Unlock()
		if spent {
			http.Error(w, "code already used", http.StatusForbidden)
			return
		}
		id := req.Client
		if a.client != nil {
			id = a.client(id)
		}
		if a.other != nil {
			key = a.other
		}
		cert := secagg.Certify(a.key, a.run, id, uint32(a.roster), key)
		json.NewEncoder(w).Encode(map[string]string{"certificate": base64.StdEncoding.EncodeToString(cert.Marshal())})
	})
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// memStore is a Store in memory: the bytes of the last Save.
type memStore struct {
	mu    sync.Mutex
	b     []byte
	saves int
}

func (m *memStore) Save(_ context.Context, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b, m.saves = bytes.Clone(b), m.saves+1
	return nil
}

func (m *memStore) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.b)
}

// hello fetches the served run's plan.
func hello(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Post(url+webclient.Service+"Hello", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestActiveRun: three page clients (the Go side of the page, over
// Connect's JSON as the browser speaks it) take part, with ten simulated
// Go clients, in a served dp-ease run whose masked rounds run secagg's
// active protocol. Each page draws its identity key, gets it certified
// by a (fake) enrolment authority it pins, and answers every masked
// round through the commitment, the signed keys and the consistency
// round; every round's sum holds all 13 vectors, and each page's list is
// the published model's fold-in of its history. Before, the page
// refused every active plan.
func TestActiveRun(t *testing.T) {
	if testing.Short() {
		t.Skip("a served run: skipped in -short")
	}
	const sim, pages, run = 10, 3, "web-active-test"
	_, key, _ := ed25519.GenerateKey(crand.Reader)
	auth := newFakeAuthority(t, &fakeAuthority{key: key, run: run, roster: sim + pages})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := deploytest.NewServer(ctx, t, deploytest.Config{Method: "dp-ease", Params: map[string]string{"secagg": "masked", "top-items": "60"},
		Simulated: sim, Pages: pages, Authority: key, Run: run})
	plan := hello(t, r.URL)
	type page struct {
		c     *webclient.Client
		cred  string
		rated []int
		res   *webclient.Result
		evs   []webclient.Event
		err   error
	}
	ps := make([]*page, pages)
	var wg sync.WaitGroup
	for k := range ps {
		c, err := webclient.New(httpTransport{r.URL}, plan)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Pin(webclient.Trust{AuthorityURL: auth.URL, AuthorityKey: key.Public().(ed25519.PublicKey), Fetch: httpFetcher{}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Remember(nil, &memStore{}); err != nil {
			t.Fatal(err)
		}
		p := &page{c: c}
		ps[k] = p
		var rs []webclient.Rating
		for j := range 15 {
			rs = append(rs, webclient.Rating{Item: 11*j + k, Value: float32(1 + (j+k)%5)})
			p.rated = append(p.rated, 11*j+k)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.cred, p.err = c.Enroll(ctx, r.Codes[k]); p.err != nil {
				return
			}
			p.res, p.err = c.Train(ctx, rs, 10, func(e webclient.Event) { p.evs = append(p.evs, e) }, nil)
		}()
	}
	wg.Wait()
	for k, p := range ps {
		if p.err != nil {
			t.Fatalf("page %d: %v; rounds: %+v", k, p.err, p.evs)
		}
	}
	r.Wait(t, time.Minute)
	pub, err := model.ReadModel(bytes.NewReader(r.Srv.Model()))
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range ps {
		if !p.c.Certified() || len(p.c.Identity().Cert) == 0 {
			t.Errorf("page %d: no certificate kept", k)
		}
		masked := 0
		for _, e := range p.evs {
			if e.Err != "" {
				t.Errorf("page %d round %d: %s", k, e.Round, e.Err)
			}
			if e.Masked {
				masked++
				if e.Clients != sim+pages {
					t.Errorf("page %d round %d: %d clients in the session, want %d", k, e.Round, e.Clients, sim+pages)
				}
			}
		}
		if masked != p.c.Rounds() || p.c.Sent().MaskedRounds != masked {
			t.Errorf("page %d: %d masked rounds answered, %d masked vectors sent, the plan has %d rounds", k, masked, p.c.Sent().MaskedRounds, p.c.Rounds())
		}
		f, err := pub.FoldIn("me", sortedInts32(p.rated), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := f.Recommend(0, 10, sortedInts32(p.rated))
		if len(want) != len(p.res.Recs) {
			t.Fatalf("page %d: %d recommendations, the published model's fold-in %d", k, len(p.res.Recs), len(want))
		}
		for j, rc := range p.res.Recs {
			if rc.Item != int(want[j].Item) || rc.Score != want[j].Score {
				t.Errorf("page %d recommendation %d: %+v; the published model's fold-in: %+v", k, j, rc, want[j])
			}
		}
		// The active protocol's steps left the page: a commitment and a
		// consistency signature per masked round.
		steps := map[string]int{}
		for _, q := range r.Requests() {
			if q.Auth != "Bearer "+p.cred || !strings.HasSuffix(q.Path, "/SecAgg") {
				continue
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(q.Body, &m); err != nil {
				t.Fatal(err)
			}
			for s := range m {
				steps[s]++
			}
		}
		if steps["commit"] != masked || steps["consistency"] != masked || steps["masked"] != masked {
			t.Errorf("page %d: SecAgg steps sent %v over %d masked rounds", k, steps, masked)
		}
		checkNoRatings(t, r, p.cred, p.rated)
	}
	led, err := r.Srv.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(led) != ps[0].c.Rounds() {
		t.Errorf("the ledger has %d rounds, the plan %d", len(led), ps[0].c.Rounds())
	}
	for _, e := range led {
		if e.Skipped != "" || e.Uploads != sim+pages {
			t.Errorf("round %d: %d masked vectors in the sum, want %d; skipped %q", e.Round, e.Uploads, sim+pages, e.Skipped)
		}
	}
}

// TestCertificateRefused: the page checks what the authority answers
// before it keeps it: an authority that reports another key than the
// pinned one, a certificate signed by another authority, one for
// another client ID, one of another identity key and one whose roster
// is not the one the authority reports are all refused, and the page
// keeps no certificate; the honest authority's is kept.
func TestCertificateRefused(t *testing.T) {
	_, pinned, _ := ed25519.GenerateKey(crand.Reader)
	_, other, _ := ed25519.GenerateKey(crand.Reader)
	otherPub := other.Public().(ed25519.PublicKey)
	plan, _ := json.Marshal(map[string]any{"method": "dp-ease", "config": map[string]string{"secagg": "masked"}, "aggregation": "masked",
		"catalog": map[string]any{"itemIds": []string{"1", "2"}}, "scale": map[string]any{"min": 1, "max": 5, "step": 1}})
	for _, tc := range []struct {
		name string
		auth fakeAuthority
		want string // "" for a certificate kept
	}{
		{"honest", fakeAuthority{key: pinned}, ""},
		{"reports another key", fakeAuthority{key: other}, "not the pinned one"},
		{"signed by another authority", fakeAuthority{key: other, report: pinned.Public().(ed25519.PublicKey)}, "not signed by the pinned authority"},
		{"for another client", fakeAuthority{key: pinned, client: func(id uint32) uint32 { return id + 1 }}, "of client 8, this page is client 7"},
		{"of another key", fakeAuthority{key: pinned, other: otherPub}, "another identity key"},
		{"for another roster", fakeAuthority{key: pinned, reportRoster: 11}, "with a roster of 10, the authority reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.auth.run, tc.auth.roster = "run", 10
			a := newFakeAuthority(t, &tc.auth)
			c, err := webclient.New(nil, plan)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Pin(webclient.Trust{AuthorityURL: a.URL, AuthorityKey: pinned.Public().(ed25519.PublicKey), Fetch: httpFetcher{}}); err != nil {
				t.Fatal(err)
			}
			c.SetCredential("7.secret-secret-secret")
			err = c.Certify(context.Background(), "code-1")
			switch {
			case tc.want == "" && (err != nil || !c.Certified()):
				t.Fatalf("the honest authority's certificate: %v (certified %v)", err, c.Certified())
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Certify: %v, want an error saying %q", err, tc.want)
			case tc.want != "" && (c.Certified() || len(c.Identity().Cert) != 0):
				t.Fatal("a refused certificate was kept")
			}
			// A kept identity with a bad certificate is refused when the
			// page restores it, too.
			if tc.want != "" && !strings.Contains(tc.name, "roster") {
				id := c.Identity()
				pub := ed25519.PrivateKey(id.Key).Public().(ed25519.PublicKey)
				signer, client := pinned, uint32(7)
				if strings.Contains(tc.name, "authority") || strings.Contains(tc.name, "reports") {
					signer = other
				} else {
					client = 8
				}
				id.Cert = secagg.Certify(signer, "run", client, 10, pub).Marshal()
				if err := c.SetIdentity(id); err == nil || !errors.Is(err, secagg.ErrIdentity) && !strings.Contains(err.Error(), "client 8") {
					t.Errorf("a kept certificate from %s: SetIdentity %v", tc.name, err)
				}
			}
		})
	}
}
