package deploy

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/gen/privrec/federation/v1/federationv1connect"
	"github.com/privrec/privrec/secagg"
	"github.com/privrec/privrec/shard"
)

// FrontConfig configures a Front.
type FrontConfig struct {
	// Coordinator is the base URL of the run's server (privrec serve
	// --nats), e.g. https://10.0.0.1:7070. Required.
	Coordinator string
	// HTTP reaches the coordinator (its TLS roots); nil means
	// http.DefaultClient.
	HTTP *http.Client
	// Conn is the front-end's connection to the run's NATS cluster: it
	// publishes the clients' pieces and commits them there. Required.
	Conn *nats.Conn
	// Run is the run's NATS name (serve --nats-run): a shard round of
	// another run is refused.
	Run string
	// MaxUploadBytes bounds every SecAgg call, whatever the coordinator
	// answers (default 64 MiB, the server's).
	MaxUploadBytes int
	// UploadTimeout bounds the publication and commit of one client's
	// pieces (default 2 minutes). It is not the client's: a client that
	// hangs up does not stop its upload half-way.
	UploadTimeout time.Duration
	// ReadHeaderTimeout and IdleTimeout are the HTTP server's (Serve;
	// defaults 10 s and 30 s). WriteTimeout bounds every call, its read
	// included (default 10 minutes): it must exceed the longest a
	// client waits for a step's answer, as the server's does.
	ReadHeaderTimeout, IdleTimeout, WriteTimeout time.Duration
	// Token is the secret the coordinator shares with its front-ends
	// (ServerConfig.FrontToken; privrec serve writes STATE/front-token).
	// The front-end sends it with every call it passes on, beside the
	// caller's address (X-Forwarded-For), so that the coordinator counts
	// failed enrolments by the caller's address. Empty: the coordinator
	// counts them by the front-end's, and one stranger's flood through a
	// front-end holds up every enrolment through it.
	Token string
	// Logger receives the front-end's warnings; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Front is a front-end of a sharded run (privrec front): a stateless
// process that serves the clients' API in the run's server's place, so
// that the masked vectors — the bulk of a round's bytes — spread over
// several machines instead of passing through the one server.
//
// Every call but SecAgg is passed to the server (the coordinator) as it
// came. A SecAgg call is first checked with the server (ShardTicket,
// with the client's own credential) before its body is read: an unknown
// credential is refused, and the body is capped at the size the server
// would take. A masked vector is then checked once more with the server,
// which pins its digest and names the shard round and the client's
// position; only then does the front-end publish the vector's pieces to
// the run's JetStream streams and commit them (shard.Upload), and send
// the step on to the server (FrontService.Published), which counts the
// admitted commit as the client's masked vector and answers it as it
// would have. Every other SecAgg step is sent on to the server.
//
// A front-end keeps nothing: one that dies costs only the calls it
// held. Their clients call another (ClientConfig.URL lists several),
// and a masked vector sent again is published under the same message
// ids (JetStream drops the copies) and committed again (answered as
// admitted); the server counts it once.
type Front struct {
	cfg   FrontConfig
	api   federationv1connect.FederationServiceClient
	fs    federationv1connect.FrontServiceClient
	js    jetstream.JetStream
	proxy *httputil.ReverseProxy
	ew    *connect.ErrorWriter
	sa    http.Handler // the Connect handler of SecAgg
	log   *slog.Logger

	published atomic.Int64
}

// Published returns how many masked vectors the front-end published and
// had admitted.
func (f *Front) Published() int64 { return f.published.Load() }

// NewFront returns a front-end of cfg.
func NewFront(cfg FrontConfig) (*Front, error) {
	if cfg.Conn == nil {
		return nil, errors.New("deploy: a front-end without a NATS connection")
	}
	u, err := url.Parse(cfg.Coordinator)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("deploy: coordinator URL %q: want https://host:port", cfg.Coordinator)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 64 << 20
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = 2 * time.Minute
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(cfg.Coordinator, "/")
	f := &Front{cfg: cfg, js: js, ew: connect.NewErrorWriter(), log: cfg.Logger,
		api: federationv1connect.NewFederationServiceClient(cfg.HTTP, base),
		fs:  federationv1connect.NewFrontServiceClient(cfg.HTTP, base)}
	tr := cfg.HTTP.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded() // the caller's address, replacing any it sent
			pr.Out.Header.Del(frontHeader)
			if cfg.Token != "" {
				pr.Out.Header.Set(frontHeader, cfg.Token)
			}
		},
		// A refusal (any status above 299) ends the call's body: the server
		// reads no more of it, and Go's HTTP/2 client, answered so
		// before it sent its body, never sends it. Without closing the
		// client's body here, the proxy's upload of it would wait for
		// bytes that never come, and the answer would not end until the
		// client gave up (TestFrontRefusalEnds).
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode > 299 {
				if b, ok := res.Request.Context().Value(inboundBody{}).(io.Closer); ok {
					b.Close()
				}
			}
			return nil
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f.log.Warn("front-end: the coordinator did not answer", "path", r.URL.Path, "err", err)
			f.refuse(w, r, connect.NewError(connect.CodeUnavailable, fmt.Errorf("the run's server did not answer the front-end: %w", err)))
		},
	}
	// The body is capped before the handler reads it (ServeHTTP);
	// Connect's own cap bounds a gRPC message decompressed.
	_, f.sa = federationv1connect.NewFederationServiceHandler(frontHandler{f: f},
		connect.WithReadMaxBytes(cfg.MaxUploadBytes), connect.WithCompressMinBytes(4<<10))
	return f, nil
}

// inboundBody is the context key of a passed-on call's body, as the
// client sends it to the front-end.
type inboundBody struct{}

// ServeHTTP serves the clients' API: SecAgg here (after the server
// checked the credential and gave the call's cap), everything else
// passed to the server.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok front")
		return
	case federationv1connect.FederationServiceSecAggProcedure:
	default:
		f.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), inboundBody{}, r.Body)))
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") {
		f.refuse(w, r, connect.NewError(connect.CodeUnauthenticated, errors.New("no bearer credential")))
		return
	}
	t, err := f.fs.ShardTicket(r.Context(), withAuth(&fedv1.ShardTicketRequest{Json: jsonCall(r)}, auth))
	if err != nil {
		f.refuse(w, r, passErr(err))
		return
	}
	limit := min(t.Msg.GetMaxBytes(), int64(f.cfg.MaxUploadBytes))
	if r.ContentLength > limit {
		f.refuse(w, r, connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("a request of %d bytes; this call takes at most %d", r.ContentLength, limit)))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if connectUnary(r) {
		if err := inflate(r, limit); err != nil {
			f.refuse(w, r, err)
			return
		}
	}
	f.sa.ServeHTTP(w, r)
}

// refuse answers r with err without reading its body (refuseCall).
func (f *Front) refuse(w http.ResponseWriter, r *http.Request, err error) {
	refuseCall(f.ew, w, r, err)
}

// Serve serves the front-end on ln over TLS (tc; nil serves plain
// HTTP, for tests behind TLS elsewhere) until ctx ends; in-flight calls
// then get up to five seconds.
func (f *Front) Serve(ctx context.Context, ln net.Listener, tc *tls.Config) error {
	hs := &http.Server{Handler: f, TLSConfig: tc, ReadHeaderTimeout: f.cfg.ReadHeaderTimeout, IdleTimeout: f.cfg.IdleTimeout,
		ReadTimeout: f.cfg.WriteTimeout, WriteTimeout: f.cfg.WriteTimeout, MaxHeaderBytes: 64 << 10}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		_ = hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// frontHandler is the front-end's Connect handler: SecAgg alone (every
// other call is proxied before it).
type frontHandler struct {
	federationv1connect.UnimplementedFederationServiceHandler
	f *Front
}

// SecAgg publishes a masked vector to the shards and sends the step on
// (see Front); any other step is sent on as it came.
func (h frontHandler) SecAgg(ctx context.Context, req *connect.Request[fedv1.SecAggRequest]) (*connect.Response[fedv1.SecAggResponse], error) {
	f, auth, msg := h.f, req.Header().Get("Authorization"), req.Msg
	m := msg.GetMasked()
	if m == nil {
		resp, err := f.api.SecAgg(ctx, withAuth(msg, auth))
		if err != nil {
			return nil, passErr(err)
		}
		return connect.NewResponse(resp.Msg), nil
	}
	if len(m.GetData())%4 != 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("upload refused (shape): a masked vector of %d bytes, not whole words", len(m.GetData())))
	}
	d := sha256.Sum256(m.GetData())
	t, err := f.fs.ShardTicket(ctx, withAuth(&fedv1.ShardTicketRequest{Round: msg.GetRound(), Session: msg.GetSession(), Digest: d[:],
		Words: uint32(len(m.GetData()) / 4), ModulusBits: m.GetModulusBits()}, auth))
	if err != nil {
		return nil, passErr(err)
	}
	tk := t.Msg
	if !tk.GetTaken() {
		if err := f.publish(ctx, tk, m); err != nil {
			return nil, err
		}
	}
	resp, err := f.fs.Published(ctx, withAuth(&fedv1.PublishedRequest{Round: msg.GetRound(), Session: msg.GetSession(),
		ModulusBits: m.GetModulusBits()}, auth))
	if err != nil {
		return nil, passErr(err)
	}
	return connect.NewResponse(resp.Msg.GetResponse()), nil
}

// publish uploads masked vector m of the client at tk's position to the
// shard round tk names and commits it (shard.Upload).
func (f *Front) publish(ctx context.Context, tk *fedv1.ShardTicketResponse, m *fedv1.MaskedUpload) error {
	if f.cfg.Run != "" && tk.GetRun() != f.cfg.Run {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("the server aggregates on NATS run %q; this front-end publishes to run %q", tk.GetRun(), f.cfg.Run))
	}
	c := shard.Config{Run: tk.GetRun(), Shards: int(tk.GetShards()), Len: int(tk.GetWords()), Clients: int(tk.GetClients()), Bits: int(tk.GetBits())}
	if err := c.Validate(); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("the server's shard round: %w", err))
	}
	if int(m.GetModulusBits()) != c.Bits || len(m.GetData()) != 4*c.Len {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("upload refused (shape): a masked vector of %d bytes mod 2^%d; the round wants %d words mod 2^%d",
			len(m.GetData()), m.GetModulusBits(), c.Len, c.Bits))
	}
	y := bytesWords(m.GetData())
	// Not the client's context: an upload stopped half-way would leave
	// some pieces stored and others not.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.UploadTimeout)
	defer cancel()
	_, err := shard.Upload(uctx, f.cfg.Conn, f.js, c, tk.GetShardRound(), &secagg.MaskedInput{From: tk.GetPosition(), Y: y})
	switch {
	case errors.Is(err, shard.ErrRefused):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("upload refused (secagg): %w", err))
	case err != nil:
		f.log.Warn("front-end: publishing a masked vector failed", "round", tk.GetShardRound(), "client", tk.GetClient(), "err", err)
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("publishing the masked vector to the shards failed: %w", err))
	}
	f.published.Add(1)
	return nil
}

// withAuth is a request carrying the client's Authorization header.
func withAuth[T any](msg *T, auth string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", auth)
	return req
}

// passErr is the server's answer err as the front-end's own: its code
// and message, without the server's HTTP headers.
func passErr(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return connect.NewError(ce.Code(), errors.New(ce.Message()))
	}
	return connect.NewError(connect.CodeUnavailable, err)
}
