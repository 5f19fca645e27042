package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// DevCertificate returns DIR/tls/cert.pem and DIR/tls/key.pem, creating a
// self-signed pair for localhost, 127.0.0.1 and ::1 (valid for a year)
// when they do not exist. Clients trust it with --ca DIR/tls/cert.pem. It
// is for development and tests; a deployment uses a certificate from its
// own authority.
func DevCertificate(dir string) (certFile, keyFile string, err error) {
	tdir := filepath.Join(dir, "tls")
	certFile, keyFile = filepath.Join(tdir, "cert.pem"), filepath.Join(tdir, "key.pem")
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return certFile, keyFile, nil
	}
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "privrec dev server"},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		IsCA:        true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", kder, 0o600); err != nil {
		return "", "", err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// HTTPClient returns an HTTP/2 client that trusts the certificates in
// caFile (PEM) besides the system roots; caFile "" means the system roots
// only.
func HTTPClient(caFile string) (*http.Client, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pemData, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("deploy: --ca: %w", err)
		}
		if !roots.AppendCertsFromPEM(pemData) {
			return nil, fmt.Errorf("deploy: --ca %s: no PEM certificate in it", caFile)
		}
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &http.Client{Transport: tr}, nil
}

// ErrNoTLS is returned by ServerTLS when neither a certificate pair nor
// dev TLS was asked for.
var ErrNoTLS = errors.New("deploy: the server needs --tls-cert and --tls-key, or --dev-tls")

// ServerTLS loads the certificate pair, or makes the dev pair under
// stateDir when dev is set.
func ServerTLS(certFile, keyFile string, dev bool, stateDir string) (*tls.Config, error) {
	if dev {
		if certFile != "" || keyFile != "" {
			return nil, errors.New("deploy: --dev-tls and --tls-cert/--tls-key exclude each other")
		}
		var err error
		if certFile, keyFile, err = DevCertificate(stateDir); err != nil {
			return nil, fmt.Errorf("deploy: dev TLS: %w", err)
		}
	}
	if certFile == "" || keyFile == "" {
		return nil, ErrNoTLS
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("deploy: TLS pair %s, %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, nil
}
