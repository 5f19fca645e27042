package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var clusterNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// natsCluster is the shape of the NATS cluster nats-config --nodes
// writes: its nodes' hosts and ports.
type natsCluster struct {
	name         string
	hosts        []string // one a node
	ports, route []int    // client and route ports, one a node
}

// newNATSCluster checks nats-config's cluster flags: nodes nodes, hosts
// one for all (on one machine, ports counting up from the first) or one
// a node, ports likewise.
func newNATSCluster(name string, nodes int, hosts []string, ports, routePorts string) (*natsCluster, error) {
	if nodes < 1 || nodes > 15 {
		return nil, fmt.Errorf("--nodes %d: want 1..15 (3 for replicated streams that survive one node)", nodes)
	}
	if !clusterNameRE.MatchString(name) {
		return nil, fmt.Errorf("--cluster-name %q: want [A-Za-z0-9_-]+", name)
	}
	cl := &natsCluster{name: name}
	switch len(hosts) {
	case 1:
		for range nodes {
			cl.hosts = append(cl.hosts, hosts[0])
		}
	case nodes:
		cl.hosts = hosts
	default:
		return nil, fmt.Errorf("--host: %d hosts for %d nodes, want 1 or %d", len(hosts), nodes, nodes)
	}
	for i, h := range cl.hosts {
		if h == "" || strings.ContainsAny(h, " \t\"/:,") && net.ParseIP(h) == nil {
			return nil, fmt.Errorf("--host %q (node %d): want a host name or IP address", h, i)
		}
	}
	var err error
	one := len(hosts) == 1
	if cl.ports, err = nodePorts("--port", ports, nodes, one); err != nil {
		return nil, err
	}
	if cl.route, err = nodePorts("--cluster-port", routePorts, nodes, one); err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for i := range nodes {
		for _, p := range []struct {
			flag string
			port int
		}{{"--port", cl.ports[i]}, {"--cluster-port", cl.route[i]}} {
			addr := net.JoinHostPort(cl.hosts[i], strconv.Itoa(p.port))
			if prev, ok := seen[addr]; ok {
				return nil, fmt.Errorf("%s: node %d listens on %s, as %s", p.flag, i, addr, prev)
			}
			seen[addr] = fmt.Sprintf("%s of node %d", p.flag, i)
		}
	}
	return cl, nil
}

// nodePorts parses a port flag: one port (for every node, or node i
// gets it plus i when the nodes share a host: count) or one a node.
func nodePorts(flag, v string, nodes int, count bool) ([]int, error) {
	f := strings.Split(v, ",")
	if len(f) != 1 && len(f) != nodes {
		return nil, fmt.Errorf("%s %s: %d ports for %d nodes, want 1 or %d", flag, v, len(f), nodes, nodes)
	}
	var out []int
	for _, s := range f {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%s %s: %q is not a port", flag, v, s)
		}
		out = append(out, p)
	}
	for i := len(out); i < nodes; i++ {
		if count {
			out = append(out, out[0]+i)
		} else {
			out = append(out, out[0])
		}
	}
	if out[len(out)-1] > 65535 {
		return nil, fmt.Errorf("%s %s: port %d of node %d", flag, v, out[len(out)-1], nodes-1)
	}
	return out, nil
}

// urls are the nodes' client URLs, comma-separated: serve's and
// aggregate's --nats.
func (cl *natsCluster) urls() string {
	var u []string
	for i, h := range cl.hosts {
		u = append(u, "tls://"+net.JoinHostPort(h, strconv.Itoa(cl.ports[i])))
	}
	return strings.Join(u, ",")
}

// nodeName is node i's server name.
func nodeName(i int) string { return fmt.Sprintf("n%d", i) }

// nodeConf is node i's nats-server configuration: JetStream with its
// store under dir, TLS for clients and for routes (each node's
// certificate signed by the cluster's CA; a route must present one, so
// only the cluster's nodes join it), routes to every other node (none,
// and no cluster block, for a single node), and the run's users
// (authorization.conf, next to it).
func (cl *natsCluster) nodeConf(i int, dir, run string, shards int) string {
	q := strconv.Quote
	tlsDir := filepath.Join(dir, "tls")
	cert, key, ca := filepath.Join(tlsDir, nodeName(i)+".pem"), filepath.Join(tlsDir, nodeName(i)+"-key.pem"), filepath.Join(tlsDir, "ca.pem")
	var b strings.Builder
	fmt.Fprintf(&b, "# privrec nats-config --run %s --shards %d --nodes %d: node %s of NATS cluster %s.\n", run, shards, len(cl.hosts), nodeName(i), cl.name)
	fmt.Fprintf(&b, "# Start it with: nats-server -c %s\n", filepath.Join(dir, nodeName(i)+".conf"))
	fmt.Fprintf(&b, "server_name: %s\nhost: %s\nport: %d\n\n", nodeName(i), q(cl.hosts[i]), cl.ports[i])
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %s\n}\n\n", q(filepath.Join(dir, nodeName(i))))
	b.WriteString("# Clients (privrec serve --nats, privrec aggregate) connect over TLS and\n# trust the cluster's CA (--nats-ca tls/ca.pem).\n")
	fmt.Fprintf(&b, "tls {\n  cert_file: %s\n  key_file: %s\n  timeout: 5\n}\n\n", q(cert), q(key))
	if len(cl.hosts) == 1 {
		// One node has no routes, and nats-server refuses a JetStream
		// cluster block without any: a single server.
		fmt.Fprintf(&b, "include %s\n", q(natsAuthFile))
		return b.String()
	}
	b.WriteString("# Routes: TLS both ways, each node showing its certificate of the cluster's CA.\n")
	fmt.Fprintf(&b, "cluster {\n  name: %s\n  host: %s\n  port: %d\n  routes: [\n", q(cl.name), q(cl.hosts[i]), cl.route[i])
	for j := range cl.hosts {
		if j != i {
			fmt.Fprintf(&b, "    %s\n", q("tls://"+net.JoinHostPort(cl.hosts[j], strconv.Itoa(cl.route[j]))))
		}
	}
	fmt.Fprintf(&b, "  ]\n  tls {\n    cert_file: %s\n    key_file: %s\n    ca_file: %s\n    verify: true\n    timeout: 5\n  }\n}\n\n", q(cert), q(key), q(ca))
	fmt.Fprintf(&b, "include %s\n", q(natsAuthFile))
	return b.String()
}

// pemFile is a file nats-config writes: its name under DIR, contents and
// mode.
type pemFile struct {
	name string
	data []byte
	mode uint32
}

// clusterCerts makes the cluster's CA and one certificate a node, for
// its host (and localhost, 127.0.0.1 and ::1), usable by a node both as
// a server and as a client of a route. Valid for validity.
func (cl *natsCluster) clusterCerts(validity time.Duration) ([]pemFile, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "privrec NATS cluster " + cl.name + " CA"},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	out := []pemFile{{"tls/ca.pem", pemBlock("CERTIFICATE", caDER), 0o644}}
	kb, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	out = append(out, pemFile{"tls/ca-key.pem", pemBlock("EC PRIVATE KEY", kb), 0o600})
	for i, h := range cl.hosts {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: nodeName(i) + "." + cl.name},
			NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(validity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, pemFile{"tls/" + nodeName(i) + ".pem", pemBlock("CERTIFICATE", der), 0o644},
			pemFile{"tls/" + nodeName(i) + "-key.pem", pemBlock("EC PRIVATE KEY", kb), 0o600})
	}
	return out, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
