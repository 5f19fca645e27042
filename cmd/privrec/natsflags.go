package main

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
)

// natsFlags are how serve and aggregate authenticate to a NATS cluster
// and check it: a creds file (a user JWT and its nkey seed, for a
// cluster run with accounts) or an nkey seed file (a cluster that lists
// user nkeys), and TLS (the cluster's CA, and a client certificate when
// the cluster asks for one). Without any, the connection is the plain
// one of a local test cluster; whoever may publish on the run's subjects
// can then forge its sums.
type natsFlags struct {
	creds, nkey, ca, cert, key string
}

func (n *natsFlags) register(f *pflag.FlagSet) {
	f.StringVar(&n.creds, "nats-creds", "", "NATS credentials file (user JWT and nkey seed) to authenticate with")
	f.StringVar(&n.nkey, "nats-nkey", "", "NATS user nkey seed file to authenticate with (instead of --nats-creds)")
	f.StringVar(&n.ca, "nats-ca", "", "PEM file of the CA that signed the NATS servers' certificates (TLS)")
	f.StringVar(&n.cert, "nats-cert", "", "client certificate (PEM) for NATS servers that ask for one; with --nats-key")
	f.StringVar(&n.key, "nats-key", "", "the client certificate's private key (PEM)")
}

// inboxPrefix is the inbox prefix of the NATS user with public nkey
// pub: with --nats-nkey, its replies and consumer deliveries arrive
// under it, and privrec nats-config lets only that user subscribe to it.
func inboxPrefix(pub string) string { return "_INBOX." + pub }

// connect connects to the cluster at url with the flags' credentials.
func (n *natsFlags) connect(url string) (*nats.Conn, error) {
	opts := []nats.Option{nats.MaxReconnects(-1)}
	switch {
	case n.creds != "" && n.nkey != "":
		return nil, errors.New("--nats-creds and --nats-nkey: give one")
	case n.creds != "":
		opts = append(opts, nats.UserCredentials(n.creds))
	case n.nkey != "":
		o, err := nats.NkeyOptionFromSeed(n.nkey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", n.nkey, err)
		}
		// The user's own inbox, the only one its permissions of
		// privrec nats-config let it subscribe to.
		var user nats.Options
		if err := o(&user); err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", n.nkey, err)
		}
		opts = append(opts, o, nats.CustomInboxPrefix(inboxPrefix(user.Nkey)))
	}
	if n.ca != "" {
		opts = append(opts, nats.RootCAs(n.ca))
	}
	switch {
	case (n.cert == "") != (n.key == ""):
		return nil, errors.New("--nats-cert and --nats-key go together")
	case n.cert != "":
		opts = append(opts, nats.ClientCert(n.cert, n.key))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("--nats %s: %w", url, err)
	}
	return nc, nil
}
