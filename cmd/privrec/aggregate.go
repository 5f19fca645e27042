package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/privrec/privrec/shard"
)

func (a *app) aggregateCmd() *cobra.Command {
	var (
		url, run     string
		natsAuth     natsFlags
		shardIndex   int
		first, count uint64
		wait         time.Duration
		signKey      string
		insecure     bool
	)
	cmd := &cobra.Command{
		Use:   "aggregate",
		Short: "Fold one item shard of secure-aggregation rounds from NATS JetStream",
		Long: `aggregate is one aggregator of a sharded run (package shard): it owns the
coordinates of shard --shard of every client's masked vector, consumes
that shard's uploads of each round from JetStream with a durable consumer,
folds the pieces of admitted clients once each, checkpoints its sum in
the run's key-value bucket before acknowledging, removes its range of the
mask streams the coordinator publishes, and publishes its shard of the sum.

The run's configuration (shards, limits, and bounds on a round's vector
length, clients and bits) is read from the run's bucket, where the
coordinator stored it; each round announces its own length, clients and
bits, and the aggregator waits for that (or the round's abort, after
which it goes on to the next). With privrec serve --nats URL --nats-run
NAME --shards S, start S of these with --run NAME. Rounds are
processed in order from --round; killed at any moment (even with
SIGKILL) and started again with the same flags, it resumes the round from
its checkpoint and durable consumer: nothing is folded twice or lost.

Each aggregator signs its results with its own Ed25519 key (--sign-key,
made by privrec aggregate keygen); the server takes a shard's result only
when that shard's public key (serve --aggregator-keys, in shard order)
signed it for the run, round and shard, so a result forged by anyone else
who may publish on the cluster is refused. Without --sign-key it refuses
to run unless --insecure (for a server run with --insecure and no keys).

On a cluster set up with privrec nats-config, connect with the shard's
seed (--nats-nkey DIR/aggregator-S.nk): its permissions let the
aggregator read only its shard's pieces and publish only its shard's
result and checkpoints.`,
		Example: `  privrec aggregate keygen --out agg0
  privrec aggregate --nats nats://127.0.0.1:4222 --run ml1m --shard 0 --round 1 --sign-key agg0/aggregator.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if url == "" || run == "" {
				return errors.New("--nats and --run are required")
			}
			var key ed25519.PrivateKey
			switch {
			case signKey != "":
				var err error
				if key, err = readEd25519Key("--sign-key", signKey); err != nil {
					return err
				}
			case !insecure:
				return errors.New("--sign-key FILE is required (privrec aggregate keygen makes one; the server needs its public key in --aggregator-keys): unsigned results can be forged by anyone who may publish on the cluster. Add --insecure to publish unsigned results anyway")
			}
			nc, err := natsAuth.connect(url)
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			var c shard.Config
			for {
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				c, err = shard.LoadConfig(lctx, js, run)
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil || wait <= 0 {
					return err
				}
				a.log.Info("waiting for the run's config", "run", run, "err", err)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
			c.SignKey = key
			ag, err := shard.NewAggregator(js, c, shardIndex)
			if err != nil {
				return fmt.Errorf("--shard: %w", err)
			}
			for r := first; count == 0 || r < first+count; r++ {
				st, err := ag.Round(ctx, r)
				switch {
				case errors.Is(err, shard.ErrAborted):
					a.log.Warn("round aborted", "round", r, "shard", shardIndex, "err", err)
					continue
				case err != nil:
					return fmt.Errorf("round %d, shard %d: %w", r, shardIndex, err)
				}
				fmt.Fprintf(a.stdout, "round %d shard %d: folded %d (resumed %d), %d duplicates, %d rejected, %d checkpoints\n",
					r, shardIndex, st.Folded, st.Resumed, st.Duplicates, st.Rejected, st.Checkpoints)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "nats", "", "NATS server URL (comma-separated for a cluster)")
	natsAuth.register(f)
	f.StringVar(&run, "run", "", "run name, as the coordinator's")
	f.IntVar(&shardIndex, "shard", 0, "the shard this aggregator owns (0..S-1)")
	f.Uint64Var(&first, "round", 1, "first round to aggregate")
	f.Uint64Var(&count, "rounds", 0, "number of rounds (0: until interrupted)")
	f.DurationVar(&wait, "wait", 2*time.Second, "retry interval while the run's config is not stored yet (0: fail at once)")
	f.StringVar(&signKey, "sign-key", "", "the aggregator's private key file (privrec aggregate keygen): its results are signed with it")
	f.BoolVar(&insecure, "insecure", false, "without --sign-key: publish unsigned results, which anyone who may publish on the cluster can forge")
	cmd.AddCommand(a.aggregateKeygenCmd())
	return cmd
}

// aggregateKeygenCmd makes an aggregator's Ed25519 key pair.
func (a *app) aggregateKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make an aggregator's signing key pair",
		Long: `keygen writes DIR/aggregator.key (the private key, mode 0600: the
aggregator's --sign-key) and DIR/aggregator.pub (its public key: the
server's --aggregator-keys entry for that shard). It refuses to replace
existing files. One key pair an aggregator, each kept by its operator.`,
		Example: `  privrec aggregate keygen --out agg0`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kf, pf, err := writeKeyPair(out, "aggregator", writeNew)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "aggregator key %s (privrec aggregate --sign-key), public key %s (privrec serve --aggregator-keys, at its shard's place)\n", kf, pf)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for aggregator.key and aggregator.pub")
	return cmd
}
