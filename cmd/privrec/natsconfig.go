package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"
	"github.com/spf13/cobra"

	"github.com/privrec/privrec/shard"
)

// natsAuthFile is the nats-server configuration fragment nats-config
// writes next to the seeds.
const natsAuthFile = "authorization.conf"

func (a *app) natsConfigCmd() *cobra.Command {
	var (
		run, out            string
		shards, nodes       int
		fronts              int
		hosts               []string
		ports, clusterPorts string
		clusterName         string
		validity            time.Duration
	)
	cmd := &cobra.Command{
		Use:   "nats-config",
		Short: "Make the NATS users and subject permissions of a sharded run",
		Long: `nats-config writes the NATS users of a sharded run (privrec serve --nats,
privrec aggregate) and their least-privilege permissions:

  DIR/coordinator.nk       nkey seed of the server (privrec serve --nats-nkey)
  DIR/aggregator-S.nk      nkey seed of shard S's aggregator (privrec aggregate --nats-nkey)
  DIR/front-I.nk           with --front-ends N: nkey seed of front-end I (privrec front --nats-nkey)
  DIR/authorization.conf   the nats-server authorization block listing those users

The seeds are written with mode 0600; hand each to its party only.
Include the block in nats-server.conf (include "authorization.conf"); it
is the server's only authorization block, so list any other user in it.
With it, a connection without one of the seeds is refused; the server
can publish the round's pieces, commits and control messages but no
result; aggregator S can consume and acknowledge only shard S's pieces,
read and write only shard S's checkpoints, and publish only shard S's
result; a front-end can publish the round's pieces and commits and
nothing else (no admission, mask streams, result or checkpoint, and it
cannot answer commits); each party receives its replies and deliveries in its own inbox
(_INBOX.<its public nkey>, which --nats-nkey selects), which nobody else
can subscribe to. Shard results are still signed (aggregate keygen):
permissions keep strangers out, signatures let the server check who
computed a result.

With --nodes N it also writes the configuration of an N-node NATS
cluster (3 for replicated streams that survive the loss of any node, the
stream leader's included; serve then creates the run's streams with 3
replicas):

  DIR/nI.conf              node I's nats-server configuration (nats-server -c DIR/nI.conf):
                           JetStream with its store in DIR/nI, routes to the other nodes,
                           TLS for clients and routes, and include "authorization.conf"
  DIR/tls/ca.pem           the cluster's CA certificate (serve and aggregate --nats-ca)
  DIR/tls/ca-key.pem       its private key (mode 0600): keep it offline, it admits nodes
  DIR/tls/nI.pem, nI-key.pem  node I's certificate (server and route client) and key (0600)
  DIR/nats-urls            the nodes' client URLs, comma-separated (serve and aggregate --nats)

Routes verify each other's certificate against the cluster's CA, so a
server without a certificate of it cannot join the cluster; clients
check the nodes' certificates against it too. The configurations hold
absolute paths under DIR: a node on another machine (--host, one a
node) needs DIR at the same path there, with only its own key.

It refuses to replace existing files.`,
		Example: `  privrec nats-config --run ml1m --shards 2 --out natsauth
  # nats-server.conf: jetstream {...}  include "natsauth/authorization.conf"
  privrec serve ... --nats nats://127.0.0.1:4222 --nats-run ml1m --shards 2 --nats-nkey natsauth/coordinator.nk
  privrec aggregate --nats nats://127.0.0.1:4222 --run ml1m --shard 0 --nats-nkey natsauth/aggregator-0.nk ...
  # a three-node cluster on this machine (ports 4222-4224, routes 6222-6224):
  privrec nats-config --run ml1m --shards 2 --nodes 3 --out natsc
  nats-server -c natsc/n0.conf & nats-server -c natsc/n1.conf & nats-server -c natsc/n2.conf &
  privrec serve ... --nats "$(cat natsc/nats-urls)" --nats-ca natsc/tls/ca.pem --nats-nkey natsc/coordinator.nk ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			c := shard.Config{Run: run, Shards: shards, Len: max(shards, 1), Clients: 1, Bits: 32}
			if err := c.Validate(); err != nil {
				return fmt.Errorf("--run %q --shards %d: %w", run, shards, err)
			}
			if fronts < 0 {
				return fmt.Errorf("--front-ends %d: want 0 or more", fronts)
			}
			var cl *natsCluster
			if cmd.Flags().Changed("nodes") {
				var err error
				if cl, err = newNATSCluster(clusterName, nodes, hosts, ports, clusterPorts); err != nil {
					return err
				}
			} else {
				for _, f := range []string{"host", "port", "cluster-port", "cluster-name", "cert-validity"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s needs --nodes", f)
					}
				}
			}
			conf, seeds, err := natsUsers(c, fronts)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return err
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			var clusterFiles []pemFile
			if cl != nil {
				if clusterFiles, err = cl.clusterCerts(validity); err != nil {
					return err
				}
				for i := range cl.hosts {
					clusterFiles = append(clusterFiles, pemFile{nodeName(i) + ".conf", []byte(cl.nodeConf(i, abs, run, shards)), 0o644})
				}
				clusterFiles = append(clusterFiles, pemFile{"nats-urls", []byte(cl.urls() + "\n"), 0o644})
			}
			names := append(seedNames(shards, fronts), natsAuthFile)
			for _, f := range clusterFiles {
				names = append(names, f.name)
			}
			for _, name := range names {
				if _, err := os.Lstat(filepath.Join(out, name)); err == nil {
					return fmt.Errorf("%s exists: nats-config does not replace users in use", filepath.Join(out, name))
				}
			}
			for i, name := range seedNames(shards, fronts) {
				if err := writeNew(filepath.Join(out, name), append(seeds[i], '\n'), 0o600); err != nil {
					return err
				}
			}
			if err := writeNew(filepath.Join(out, natsAuthFile), []byte(conf), 0o644); err != nil {
				return err
			}
			if len(clusterFiles) > 0 {
				if err := os.MkdirAll(filepath.Join(out, "tls"), 0o700); err != nil {
					return err
				}
			}
			for _, f := range clusterFiles {
				if err := writeNew(filepath.Join(out, f.name), f.data, os.FileMode(f.mode)); err != nil {
					return err
				}
			}
			fmt.Fprintf(a.stdout, "run %s, %d shards: seeds %s/{%s}, authorization block %s (include it in nats-server.conf)\n",
				run, shards, out, strings.Join(seedNames(shards, fronts), ","), filepath.Join(out, natsAuthFile))
			if cl != nil {
				fmt.Fprintf(a.stdout, "cluster %s of %d nodes: nats-server -c %s/nI.conf for I in 0..%d; clients: --nats %s --nats-ca %s\n",
					cl.name, len(cl.hosts), out, len(cl.hosts)-1, cl.urls(), filepath.Join(out, "tls", "ca.pem"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "the run's name (serve --nats-run, aggregate --run)")
	f.IntVar(&shards, "shards", 0, "the run's number of shards (serve --shards)")
	f.IntVar(&fronts, "front-ends", 0, "also make this many front-end users (privrec front)")
	f.StringVar(&out, "out", "", "directory for the seeds and "+natsAuthFile)
	f.IntVar(&nodes, "nodes", 0, "also write the configurations of a NATS cluster of this many nodes (3: replicated streams)")
	f.StringSliceVar(&hosts, "host", []string{"127.0.0.1"}, "with --nodes: the nodes' host, one for all (ports count up) or one a node, comma-separated")
	f.StringVar(&ports, "port", "4222", "with --nodes: the nodes' client port, one (node I gets it plus I) or one a node, comma-separated")
	f.StringVar(&clusterPorts, "cluster-port", "6222", "with --nodes: the nodes' route port, one (node I gets it plus I) or one a node, comma-separated")
	f.StringVar(&clusterName, "cluster-name", "privrec", "with --nodes: the NATS cluster's name")
	f.DurationVar(&validity, "cert-validity", 365*24*time.Hour, "with --nodes: how long the cluster's CA and node certificates are valid")
	return cmd
}

// seedNames are the seed files of a run's parties: the coordinator,
// the aggregators in shard order, then the front-ends.
func seedNames(shards, fronts int) []string {
	names := []string{"coordinator.nk"}
	for s := range shards {
		names = append(names, fmt.Sprintf("aggregator-%d.nk", s))
	}
	for i := range fronts {
		names = append(names, fmt.Sprintf("front-%d.nk", i))
	}
	return names
}

// natsUsers makes one nkey user a party of run c with fronts
// front-ends and returns the nats-server authorization block and the
// seeds, in seedNames' order.
func natsUsers(c shard.Config, fronts int) (string, [][]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "# privrec nats-config --run %s --shards %d: the NATS users of run %s and their\n", c.Run, c.Shards, c.Run)
	b.WriteString("# permissions. Include this file in nats-server.conf; it is the server's\n")
	b.WriteString("# authorization block: list any other user in it.\n")
	b.WriteString("authorization {\n  users = [\n")
	var seeds [][]byte
	for i, name := range seedNames(c.Shards, fronts) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return "", nil, err
		}
		seed, err := kp.Seed()
		if err != nil {
			return "", nil, err
		}
		seeds = append(seeds, seed)
		var p shard.Permissions
		switch {
		case i == 0:
			p = shard.CoordinatorPermissions(c, inboxPrefix(pub))
			fmt.Fprintf(&b, "    # the coordinator: privrec serve --nats-nkey %s\n", name)
		case i > c.Shards:
			p = shard.FrontEndPermissions(c, inboxPrefix(pub))
			fmt.Fprintf(&b, "    # front-end %d: privrec front --nats-nkey %s\n", i-1-c.Shards, name)
		default:
			p = shard.AggregatorPermissions(c, i-1, inboxPrefix(pub))
			fmt.Fprintf(&b, "    # the aggregator of shard %d: privrec aggregate --shard %d --nats-nkey %s\n", i-1, i-1, name)
		}
		fmt.Fprintf(&b, "    {\n      nkey: %q\n      permissions: {\n", pub)
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", confList(p.Publish))
		fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", confList(p.Subscribe))
		if p.AllowResponses {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String(), seeds, nil
}

// confList writes subjects as a nats-server configuration list, one a
// line, quoted.
func confList(subjects []string) string {
	var b strings.Builder
	b.WriteString("[\n")
	for _, s := range subjects {
		b.WriteString("          " + strconv.Quote(s) + "\n")
	}
	b.WriteString("        ]")
	return b.String()
}
