// Package shard runs the aggregation of secure-aggregation rounds
// (package secagg) across several processes on NATS JetStream: the item
// catalog — the coordinates [0, L) of every client's masked vector — is
// split into S contiguous shards, each owned by one aggregator.
//
// # Flow of a round
//
//  1. The coordinator (Coordinator) runs the secagg key and share steps
//     exactly as the single server does (it wraps a secagg.Server).
//  2. A client masks its vector as usual, splits it by shard and
//     publishes the pieces (Upload) to JetStream subjects
//     privrec.<run>.up.<round>.<shard> of the shard's stream
//     PRIVREC_<run>_UP_<shard>, each with the message id <client>.<round>.<shard>, so JetStream's
//     duplicate window drops a replayed publish. Once every piece is
//     stored (acknowledged by JetStream), the client commits: a request
//     to the coordinator carrying a SHA-256 digest of each piece (the
//     same commit again is answered as admitted, so a client may retry).
//  3. The coordinator admits a commit at most once per client and round
//     (secagg.Server.RecordMaskedInput: the client must be in U2 and not
//     admitted before), and publishes the admission with the digests on
//     privrec.<run>.ctl.<round>.admit (stream PRIVREC_<run>_CTL). The
//     admitted clients are U3; closing the input step publishes a close
//     message with |U3|.
//  4. Each aggregator consumes its shard's subject with a durable pull
//     consumer and folds a piece into its shard sum only if its client
//     is admitted, the piece's digest is the admitted one, and the
//     client was not folded before. A piece whose client is not yet
//     admitted (the usual case: the commit follows the pieces) is held
//     unacknowledged until the admission arrives (beyond half of
//     MaxAckPending, redelivered later instead); after the close it is
//     dropped (Term). So every shard folds the same set U3, each
//     client's piece exactly once — one masked input per client per
//     round across shards; a client that uploads a different or a second
//     piece for a shard has that piece rejected on every aggregator.
//  5. The coordinator collects the unmasking shares, reconstructs the
//     seeds and derives the PRG streams to remove
//     (secagg.Server.MaskStreams: each survivor's self mask, each
//     survivor–dropped pairwise mask), and publishes them once on
//     privrec.<run>.ctl.<round>.unmask (in parts of at most 30,000
//     streams, 17 B each). Every stream is AES-128-CTR with
//     a zero IV, word i at byte 4i, so aggregator s expands only its
//     range [a_s, b_s) of each stream (one PRG stream per shard and
//     offset: counter a_s/4, skipping the first a_s mod 4 words of that
//     block). The aggregator subtracts them, masks to Bits and publishes
//     its shard of the sum on privrec.<run>.ctl.<round>.result.<shard>,
//     signed (see Signed results).
//  6. The coordinator concatenates the S results — bit for bit the sum
//     the single server's Result returns — and the caller publishes the
//     next broadcast (Coordinator.Broadcast); the round's uploads are
//     purged.
//
// A deployed server (privrec serve --nats, deploy.Sharded) is the
// coordinator; each of its secure-aggregation sessions is one round
// here, aborted when it ends without a sum. Masked vectors reach
// JetStream in one of two ways. Without front-ends the server uploads
// on its clients' behalf: it receives their masked vectors over its own
// API and calls Upload for each (Coordinator.AddMaskedInput). With
// front-ends (privrec front, deploy.Front) the clients call stateless
// front-end processes, which ask the server, with the client's own
// credential, for the shard round and the client's position before
// publishing anything, call Upload themselves (pieces and commit, under
// the client's position) and tell the server; the server takes the
// client's admitted commit as its masked input (AddMaskedInput with no
// words checks IsAdmitted). A front-end killed mid-upload costs a
// retry: its client sends the same vector through another, which
// publishes under the same message ids and commits again.
//
// # Exactly once and crashes
//
// An aggregator acknowledges a piece only after a checkpoint that
// contains it: the shard sum and the set of folded clients, written to
// the JetStream key-value bucket PRIVREC_<run>_CKPT under
// r<round>.s<shard>. A crashed aggregator restarts from that checkpoint
// and its durable consumer: the pieces it had not acknowledged are
// redelivered after AckWait, and those of clients already in the
// checkpoint are acknowledged without folding. A piece is therefore
// folded once, and none is lost while the stream holds it.
//
// # Clusters
//
// On a JetStream cluster the run's streams and checkpoint bucket are
// replicated (Config.Replicas; 3 by default on a cluster of three or
// more): each has a leader, elected by RAFT among its replicas, and a
// publish is acknowledged once a majority stored it. When a leader
// dies, its replicas elect another within 4 to 9 s, and nothing
// acknowledged is lost. Every party rides through the election: each
// JetStream request is bounded (a few seconds) and sent again until it
// is answered — a publish under the same message id (dropped as a
// duplicate if the first was stored; and an aggregator folds a
// client's piece once however often it is stored), a checkpoint with
// the same value, a consumer with the same config, a commit answered
// again as admitted. The coordinator reads the results message by
// message (the next on the round's result subjects from a sequence);
// an aggregator fetches its pieces in pulls that expire after 100 ms,
// and its control consumer notices a lost pull within a second; so
// neither waits on a consumer its dead server held. Connect with every
// server's URL (comma-separated) so that a client whose server died
// reconnects to another. TestClusterLeaderKill SIGKILLs the leader of
// the run's streams amid uploads and during unmasking: each round ends
// with the single server's sum, or is aborted whole.
//
// # Backpressure
//
// Each shard's upload stream is a work queue (a piece is deleted once
// its aggregator acknowledged it) holding at most Backlog pieces a round
// (MaxMsgsPerSubject, DiscardNewPerSubject) and MaxBytes: when a slow
// aggregator's backlog fills it, publishes fail and Upload retries with
// exponential backoff, so a slow shard slows admission. One stream per
// shard lets a cluster place the shards' stream leaders on different
// servers. An aggregator
// holds at most MaxAckPending unacknowledged pieces; its memory is its
// shard sum, one digest and one bit per client.
//
// # Trust and privacy
//
// The coordinator and the aggregators together are the secagg server:
// they are trusted like it (honest but curious, colluding with at most
// the secagg fraction of clients), and the mask streams they exchange
// are as secret as the reconstructed seeds. JetStream and its storage
// hold only masked pieces, which are uniformly random modulo 2^Bits to
// anyone without the seeds. Sharding changes no privacy bound of the
// round: the released sum is the single server's, over the same U3.
//
// # Signed results
//
// Whoever may publish on a run's control subjects could otherwise
// publish a shard's result before its aggregator and have it taken.
// Each aggregator therefore holds an Ed25519 key (Config.SignKey) and
// signs its result: the signature, in the result message's header
// Privrec-Sig (standard base64), is over the tag "privrec shard
// result v1", the run name, the round, the shard and the result's
// words (the message body). The coordinator holds the aggregators'
// public keys, one per shard (Config.AggregatorKeys), and takes a
// shard's result only when that shard's key signed it for this run,
// round and shard: an unsigned result, one signed by another key, one
// signed for another run, round or shard, and a genuine result
// replayed from another round are logged and skipped, and the
// coordinator waits on for the genuine one. The keys are each party's
// own configuration and never stored on the cluster.
//
// The result's JetStream message id (Nats-Msg-Id) is derived from its
// signature (result.<round>.<shard>.<first 16 bytes of its SHA-256>).
// With a fixed id (result.<round>.<shard>), a forger publishing first
// under it would have the genuine result dropped as its duplicate by
// JetStream's de-duplication, and the round would stall; nobody
// without the key can predict the signature, hence the id. Ed25519
// signatures are deterministic, so an aggregator that publishes its
// checkpointed result again after a crash does so under the same id,
// and JetStream drops the copy. Without keys a coordinator takes the
// first well-formed result of each shard (privrec serve refuses --nats
// without --aggregator-keys unless --insecure; privrec aggregate keygen
// makes an aggregator's key pair).
//
// A signature says that the shard's aggregator computed the result
// from what it read; it does not authenticate the control messages,
// pieces and checkpoints the aggregator reads, so a party that may
// publish those can still steer what an aggregator folds and signs.
// The cluster's subject permissions close that: Permissions
// (CoordinatorPermissions, FrontEndPermissions, AggregatorPermissions;
// privrec nats-config writes them as nkey users) let only the
// coordinator and the front-ends publish pieces and commits, only the
// coordinator control messages, and neither a result; let aggregator s
// consume only shard s's pieces, write only shard s's checkpoints and
// publish only shard s's result; and give each party an inbox of its
// own, so nobody reads another's deliveries.
//
// # Limits
//
// A client that commits digests of pieces it never uploads stalls the
// round until the caller's deadline, and the round releases nothing (as
// an abort of the single server); the commit arrives after JetStream
// stored the pieces, so an honest client cannot cause this. A piece, a
// shard result and a checkpoint (shard sum plus one bit a client) are
// single messages and must fit the NATS maximum payload (1 MiB by
// default): shards of at most about 250,000 words (NewCoordinator refuses
// a round whose shard does not fit). The mask streams go in parts of
// 30,000. Rounds are numbered by the caller; an aggregator command
// processes them in order, so a round number must not be skipped: a
// caller that gives a round up, even before opening it, aborts it
// (Coordinator.Abort, Abort) and its aggregators go on to the next.
package shard
