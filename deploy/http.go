package deploy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Mux returns the server's HTTP routes: the federation service, /healthz
// and, with a gatherer, Prometheus /metrics.
func (s *Server) Mux(g prometheus.Gatherer) *http.ServeMux {
	mux := http.NewServeMux()
	path, h := s.Handler()
	mux.Handle(path, h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		state, round := s.state, s.round
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "ok %s round %d\n", state, round)
	})
	if g != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	return mux
}

// Serve serves the run on ln over TLS (tc) and runs its rounds. It
// returns nil once the run is done and linger has passed (clients fetch
// the final model meanwhile; linger <= 0 serves until ctx ends), and
// ctx's error when ctx ends first: the open round is abandoned, in-flight
// calls get up to five seconds, and a restart on the same state resumes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, tc *tls.Config, g prometheus.Gatherer, linger time.Duration) error {
	hs := &http.Server{Handler: s.Mux(g), TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: nil}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	shutdown := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	select {
	case err := <-serveErr:
		s.log.Error("http server stopped", "err", err)
		return err
	case err := <-runErr:
		if err != nil {
			shutdown()
			return err
		}
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	} else {
		<-ctx.Done()
	}
	shutdown()
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
