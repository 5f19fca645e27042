package deploy

import (
	"context"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
)

// downFor is how long a URL that could not be reached is tried last.
const downFor = 10 * time.Second

// newAPI returns the client of the server at url, or, when url lists
// several comma-separated URLs (the front-ends of one run, privrec
// front), a client that spreads the clients over them and moves a call
// that could not reach its URL on to the next (failover).
func newAPI(hc *http.Client, url string) federationv1connect.FederationServiceClient {
	var urls []string
	for _, u := range strings.Split(url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) <= 1 {
		return federationv1connect.NewFederationServiceClient(hc, strings.TrimSpace(url))
	}
	f := &failover{down: make([]time.Time, len(urls))}
	for _, u := range urls {
		f.apis = append(f.apis, federationv1connect.NewFederationServiceClient(hc, u))
	}
	return f
}

// failover is a client of several URLs serving one run. Each client
// (credential) calls its own URL first, chosen by a hash of its
// credential, so that the clients of one process spread over the
// front-ends; a call that cannot reach its URL (unreachable: no answer
// from a server) is sent to the next one, and a URL that failed is tried
// last for downFor. Sending a call again elsewhere is what a client does
// after a failure anyway: every call is safe to repeat (a masked vector
// sent again through another front-end is published under the same
// message ids and counted once).
type failover struct {
	apis []federationv1connect.FederationServiceClient

	mu   sync.Mutex
	down []time.Time // when each URL last failed
}

// order returns the URLs' indices in the order a call with header h
// tries them.
func (f *failover) order(h http.Header) []int {
	hash := fnv.New32a()
	hash.Write([]byte(h.Get("Authorization")))
	n := len(f.apis)
	start := int(hash.Sum32() % uint32(n))
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var up, down []int
	for k := range n {
		i := (start + k) % n
		if now.Sub(f.down[i]) < downFor {
			down = append(down, i)
		} else {
			up = append(up, i)
		}
	}
	return append(up, down...)
}

func (f *failover) failed(i int) {
	f.mu.Lock()
	f.down[i] = time.Now()
	f.mu.Unlock()
}

// failoverCall sends req through f's URLs in order until one answers.
func failoverCall[Req, Resp any](ctx context.Context, f *failover, req *connect.Request[Req],
	call func(federationv1connect.FederationServiceClient) (*connect.Response[Resp], error)) (*connect.Response[Resp], error) {
	var err error
	for _, i := range f.order(req.Header()) {
		var resp *connect.Response[Resp]
		if resp, err = call(f.apis[i]); err == nil || ctx.Err() != nil || !unreachable(err) {
			return resp, err
		}
		f.failed(i)
	}
	return nil, err
}

func (f *failover) Hello(ctx context.Context, req *connect.Request[fedv1.HelloRequest]) (*connect.Response[fedv1.HelloResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.HelloResponse], error) {
		return c.Hello(ctx, req)
	})
}

func (f *failover) Enroll(ctx context.Context, req *connect.Request[fedv1.EnrollRequest]) (*connect.Response[fedv1.EnrollResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.EnrollResponse], error) {
		return c.Enroll(ctx, req)
	})
}

func (f *failover) GetRound(ctx context.Context, req *connect.Request[fedv1.GetRoundRequest]) (*connect.Response[fedv1.GetRoundResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.GetRoundResponse], error) {
		return c.GetRound(ctx, req)
	})
}

func (f *failover) Upload(ctx context.Context, req *connect.Request[fedv1.UploadRequest]) (*connect.Response[fedv1.UploadResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.UploadResponse], error) {
		return c.Upload(ctx, req)
	})
}

func (f *failover) GetModel(ctx context.Context, req *connect.Request[fedv1.GetModelRequest]) (*connect.Response[fedv1.GetModelResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.GetModelResponse], error) {
		return c.GetModel(ctx, req)
	})
}

func (f *failover) SecAgg(ctx context.Context, req *connect.Request[fedv1.SecAggRequest]) (*connect.Response[fedv1.SecAggResponse], error) {
	return failoverCall(ctx, f, req, func(c federationv1connect.FederationServiceClient) (*connect.Response[fedv1.SecAggResponse], error) {
		return c.SecAgg(ctx, req)
	})
}

var _ federationv1connect.FederationServiceClient = (*failover)(nil)
