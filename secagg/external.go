package secagg

import "fmt"

// MaskStream is one PRG stream that an aggregator must remove from the
// sum of the masked inputs: PRG(Key), subtracted (Sub) or added, word by
// word modulo 2^32, then the sum is masked to Params.Bits. The streams of
// a round are the self masks of the survivors and the pairwise masks
// between survivors and clients that dropped after sharing their keys.
// A stream is seekable (AES-128-CTR, zero IV, word i at byte 4i), so an
// aggregator that holds only the coordinates [a, b) of the sum expands
// only that range of each stream.
type MaskStream struct {
	Key [16]byte
	Sub bool
}

// RecordMaskedInput records that client from's masked input was accepted
// by aggregators outside this Server (sharded aggregation): from joins
// U3 exactly as by AddMaskedInput, but its vector is not summed here.
// The caller must not mix it with AddMaskedInput in one round.
func (s *Server) RecordMaskedInput(from uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enter(stageInput); err != nil {
		return err
	}
	if err := s.from(from); err != nil {
		return err
	}
	if !s.sent[from] || s.in3[from] {
		return fmt.Errorf("%w: masked input from %d, which did not share keys, was excluded, or sent twice", ErrMessage, from)
	}
	if s.checks != nil && !s.checking {
		return fmt.Errorf("%w: masked input of %d before the check round closed", ErrState, from)
	}
	s.in3[from] = true
	return nil
}

// MaskStreams ends the protocol like Result, for a round whose masked
// inputs were summed elsewhere (RecordMaskedInput): it reconstructs the
// needed seeds from the revealed shares and returns, instead of the
// unmasked sum, the PRG streams to remove from the sum of the masked
// inputs. Errors are those of Result. The streams are as secret as the
// seeds: whoever holds them and one client's masked input can remove
// that client's self mask, so they go only to the aggregators, which are
// part of the server. The streams come in Result's order (self masks by
// survivor, then each dropped client's pairwise masks), derived as
// Result derives them (unmask.go); secagg.AddMaskRange expands a range.
func (s *Server) MaskStreams() ([]MaskStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unmaskKeys()
}

// RemoveMasks removes streams (MaskStreams) from sum, which holds the words
// [off, off+len(sum)) of the sum of the masked inputs — a shard's range —
// modulo 2^32, in place, on every core: each worker takes a range of
// coordinates at a time and expands every stream over it only, as Result
// does. It does not reduce the words to the round's bits.
func RemoveMasks(sum []uint32, off int, streams []MaskStream) error {
	if off < 0 {
		return fmt.Errorf("secagg: RemoveMasks at offset %d", off)
	}
	removeMasks(sum, off, streams)
	return nil
}
