package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrRounds is returned by Run when the server is not done after
// RunOptions.MaxRounds rounds.
var ErrRounds = errors.New("protocol: round limit reached")

// RoundInfo describes a finished round, for hooks.
type RoundInfo struct {
	Round   int
	Phase   string
	Uploads int           // non-nil uploads aggregated (0 when Rejected)
	Items   int           // Σ len(Items) over the uploads
	Elapsed time.Duration // wall time of the round, hooks excluded
	// Rejected, when not nil, says that the round's unmasked sum failed
	// the server's SumChecker: it wraps ErrOutOfBounds and names the
	// first violated bound. The server then aggregated nothing
	// (Aggregate(round, nil)): the round released nothing and moved no
	// model value. Its clients' inputs were still summed and unmasked, so
	// the privacy they spent on it is spent: a ledger records the round
	// as rejected, not as absent.
	Rejected error
}

// RunOptions configures Run.
type RunOptions struct {
	// Workers is the number of goroutines of the in-process transport;
	// <= 0 means runtime.GOMAXPROCS(0). The result does not depend on it.
	Workers int
	// Seed labels every client's random streams: client c draws in round t
	// from rng.New(Seed, c, t).
	Seed uint64
	// Aggregation wraps the transport: AggIdeal in SecureSum (the server
	// receives only per-item sums of the uploads, never one client's),
	// AggMasked in MaskedSum (only sums of dense integer uploads).
	Aggregation Aggregation
	// MaskProtocol, under AggMasked, when not nil, runs a secure-
	// aggregation protocol in process (secagg.SimulateSum: SecAgg+)
	// rather than adding the integer vectors directly (the same sum).
	MaskProtocol SumProtocol
	// MaxRounds stops a server that is never Done; 0 means 1<<20.
	MaxRounds int
	// Transcript, when not nil, receives every broadcast and every upload
	// of the run (see TranscriptWriter), headed by Header.
	Transcript io.Writer
	Header     TranscriptHeader
	// OnRound, when not nil, is called after each round's aggregation; an
	// error stops the run and is returned.
	OnRound func(RoundInfo) error
	// StartRound is the first round RunTransport broadcasts (0 when
	// zero): set it to a restored Stateful server's Round() to resume a
	// run, with the same clients, from the round after its last
	// aggregation. MaxRounds still counts from round 0.
	StartRound int
	// Participation, when not the zero value (a roster run), runs the
	// clients in process over cohorts (Cohorts): each training round asks
	// Participation.Cohort of the clients whose limits allow it, picked by
	// Choose (nil: SeededCohort(Seed)), and every client enforces
	// MaxRounds and MinGap itself (Limit).
	Participation Participation
	// Choose, when not nil, picks each training round's cohort (a server's
	// choice, honest or not); it implies the cohort transport even for a
	// zero Participation.
	Choose CohortChooser
}

// Run runs srv with clients in process (InMem transport) until srv is
// Done.
func Run(ctx context.Context, srv Server, clients []Client, opt RunOptions) error {
	var tr Transport
	var err error
	if opt.Participation != (Participation{}) || opt.Choose != nil {
		tr, err = NewCohorts(clients, opt.Participation, opt.Choose, opt.Workers, opt.Seed)
	} else {
		tr, err = NewInMem(clients, opt.Workers, opt.Seed)
	}
	if err != nil {
		return err
	}
	defer tr.Close()
	switch opt.Aggregation {
	case AggIdeal:
		return RunTransport(ctx, srv, NewSecureSum(tr), opt)
	case AggMasked:
		m := NewMaskedSum(tr, opt.Seed)
		m.Protocol = opt.MaskProtocol
		return RunTransport(ctx, srv, m, opt)
	}
	return RunTransport(ctx, srv, tr, opt)
}

// RunTransport runs srv over any transport until srv is Done. Every
// broadcast and upload is validated; a malformed message stops the run
// with an error wrapping ErrMessage.
//
// When the transport returns a round's single masked sum (an upload with
// Client −1 and Words, as MaskedSum and a deployment's SecAgg+ transport
// do) and srv is a SumChecker, RunTransport checks the sum before srv
// folds it, with the transport's SumInputs (or NumClients) as the number
// of inputs. A sum out of bounds (ErrOutOfBounds) does not stop the run:
// the round is skipped, srv.Aggregate(round, nil) is called instead, and
// RoundInfo.Rejected reports it to the hook. Any other CheckSum error
// stops the run.
func RunTransport(ctx context.Context, srv Server, tr Transport, opt RunOptions) error {
	maxRounds := opt.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 1 << 20
	}
	var tw *TranscriptWriter
	if opt.Transcript != nil {
		h := opt.Header
		h.Seed, h.NumClients = opt.Seed, tr.NumClients()
		var err error
		if tw, err = NewTranscriptWriter(opt.Transcript, h); err != nil {
			return err
		}
	}
	for round := opt.StartRound; !srv.Done(); round++ {
		if round >= maxRounds {
			return fmt.Errorf("%w: %d rounds", ErrRounds, maxRounds)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		b, err := srv.Broadcast(round)
		if err != nil {
			return fmt.Errorf("protocol: broadcast of round %d: %w", round, err)
		}
		if b.Round != round {
			return fmt.Errorf("%w: server broadcast round %d in round %d", ErrMessage, b.Round, round)
		}
		if err := b.Validate(); err != nil {
			return err
		}
		ups, err := tr.Exchange(ctx, b)
		if err != nil {
			return err
		}
		info := RoundInfo{Round: round, Phase: b.Phase}
		for _, u := range ups {
			if u == nil {
				continue
			}
			if err := u.Validate(b); err != nil {
				return err
			}
			info.Uploads++
			info.Items += len(u.Items)
		}
		if tw != nil {
			if err := tw.Write(b, ups); err != nil {
				return err
			}
		}
		if sum := maskedSum(b, ups); sum != nil {
			inputs := tr.NumClients()
			if si, ok := tr.(SumInputs); ok {
				inputs = si.SumInputs()
			}
			if sc, ok := srv.(SumChecker); ok {
				if err := sc.CheckSum(round, sum, inputs); err != nil {
					if !errors.Is(err, ErrOutOfBounds) {
						return fmt.Errorf("protocol: check of round %d: %w", round, err)
					}
					info.Rejected, info.Uploads, info.Items = err, 0, 0
					ups = nil
				}
			}
			if is, ok := srv.(SumInputsSetter); ok && ups != nil {
				is.SetSumInputs(round, inputs)
			}
		}
		if err := srv.Aggregate(round, ups); err != nil {
			return fmt.Errorf("protocol: aggregate of round %d: %w", round, err)
		}
		info.Elapsed = time.Since(start)
		if opt.OnRound != nil {
			if err := opt.OnRound(info); err != nil {
				return err
			}
		}
	}
	return nil
}
