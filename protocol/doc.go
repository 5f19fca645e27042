// Package protocol is the client/server protocol every privrec method runs
// on, and an in-process runner for it.
//
// A method is a Server, which aggregates, and Clients, which hold data: a
// user's device, or one party (a vendor, a trusted recommender) holding
// many users. They talk only through two plain-data messages:
//
//   - Broadcast: what the server sends to every client at the start of a
//     round (the public item factors V, per-item counts, public
//     hyperparameters, method-specific per-item vectors);
//   - Upload: what one client sends back (sparse per-item contributions:
//     item indices, Dim values per item, counts).
//
// Both have only exported fields of basic types and slices, so a network
// transport can serialize them with encoding/gob, JSON or protobuf. A
// Client sees only its own data (held in the client's own unexported
// fields, built by the method's package) and the broadcasts; a Server sees
// only uploads: its Aggregate method receives []*Upload and nothing else.
// The method packages (privrec/hdpmf, sdcf, ldpop) keep client data in unexported
// types, so a server value holds no path to any rating.
//
// A round is: the server's Broadcast, every client's Round (in parallel),
// then the server's Aggregate of the uploads in client order. Transport
// carries one round; InMem runs the clients in process on a pool of
// goroutines, each client with its own random stream
// rng.New(seed, clientID, round), and returns the uploads in client order,
// so a result depends on the seed only, never on the worker count or on
// scheduling. A network transport implements the same interface.
//
// A run over cohorts of a population (issue 45; Participation, the
// method's limits): Cohorts asks each training round only the clients a
// CohortChooser picks (SeededCohort, an honest server's uniform choice
// among the clients whose limits allow the round), and wraps every client
// in Limit, so that it answers at most Participation.MaxRounds training
// rounds, two at least MinGap apart, whatever the chooser picks;
// RunOptions.Participation and Choose route Run through it.
//
// Run drives the rounds until the server is Done, optionally records the
// transcript of everything the server sends and receives (WriteTranscript
// format, read back by TranscriptReader, for attack tests) and calls
// per-round hooks for metrics and progress.
//
// A deployment runs the server and the clients in different processes and
// must survive a crash of the server: a Stateful server saves its state
// between rounds (MarshalBinary) and restores it into a server built
// with the same configuration (UnmarshalBinary); RunOptions.StartRound
// then resumes the loop at the restored server's Round.
//
// Ownership: a Broadcast is read-only for clients and stays valid until
// the next call of Server.Broadcast. An Upload returned by Client.Round
// may be a buffer the client reuses; it stays valid until the client's
// next Round call, so servers copy what they keep.
package protocol
