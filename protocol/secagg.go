package protocol

import (
	"context"
	"fmt"
)

// SecureSum wraps a transport so that the server receives, each round,
// only the per-item sums of the clients' uploads, as one Upload with
// Client = −1: the ideal functionality of secure aggregation (Bonawitz et
// al., CCS 2017). Distributed-noise methods (DPMF, PDPMF, HDPMF, LDP-OP)
// need it: each client adds only a small share of the noise, so a server
// that sees single uploads sees nearly clean gradients; their ε holds
// against a server that sees sums. In process, SecureSum is exact; a
// network deployment must realize it with a cryptographic protocol (masked
// sums), and says so.
//
// The summed upload lists, in increasing order, every item that received a
// contribution; Values is the sum of the clients' rows (nil when no client
// sent values, as in a setup round); Counts is the sum of the clients'
// counts, or the number of contributing clients for clients that sent no
// counts; Scalars is the element-wise sum. Every client upload is
// validated against the broadcast before it is summed.
type SecureSum struct {
	inner   Transport
	sum     Upload
	out     [1]*Upload
	vals    []float32
	counts  []int32
	touched []bool
}

// NewSecureSum returns inner wrapped so that Exchange returns only sums.
func NewSecureSum(inner Transport) *SecureSum { return &SecureSum{inner: inner} }

// NumClients returns the number of clients of the inner transport.
func (s *SecureSum) NumClients() int { return s.inner.NumClients() }

// Close closes the inner transport.
func (s *SecureSum) Close() error { return s.inner.Close() }

// Exchange runs the round on the inner transport and returns one summed
// upload (or none when no client sent anything). The returned upload is
// reused by the next Exchange.
func (s *SecureSum) Exchange(ctx context.Context, b *Broadcast) ([]*Upload, error) {
	ups, err := s.inner.Exchange(ctx, b)
	if err != nil {
		return nil, err
	}
	return s.add(b, ups)
}

// add returns the per-item sum of ups as one upload.
func (s *SecureSum) add(b *Broadcast, ups []*Upload) ([]*Upload, error) {
	n, dim := b.NumItems, b.Dim
	if len(s.touched) != n || len(s.vals) != n*dim {
		s.touched = make([]bool, n)
		s.counts = make([]int32, n)
		s.vals = make([]float32, n*dim)
	} else {
		clear(s.touched)
		clear(s.counts)
		clear(s.vals)
	}
	any, hasValues := false, false
	var scalars []float64
	for _, u := range ups {
		if u == nil {
			continue
		}
		if err := u.Validate(b); err != nil {
			return nil, err
		}
		for k, i := range u.Items {
			s.touched[i] = true
			if u.Counts != nil {
				s.counts[i] += u.Counts[k]
			} else {
				s.counts[i]++
			}
		}
		if u.Values != nil {
			hasValues = true
			for k, i := range u.Items {
				row := s.vals[int(i)*dim : (int(i)+1)*dim]
				for d, v := range u.Values[k*dim : (k+1)*dim] {
					row[d] += v
				}
			}
		}
		if len(u.Scalars) > len(scalars) {
			scalars = append(scalars, make([]float64, len(u.Scalars)-len(scalars))...)
		}
		for k, v := range u.Scalars {
			scalars[k] += v
		}
		any = true
	}
	if !any {
		s.out[0] = nil
		return s.out[:0], nil
	}
	sum := &s.sum
	*sum = Upload{Client: -1, Round: b.Round, Items: sum.Items[:0], Counts: sum.Counts[:0], Values: sum.Values[:0], Scalars: scalars}
	for i, t := range s.touched {
		if !t {
			continue
		}
		sum.Items = append(sum.Items, int32(i))
		sum.Counts = append(sum.Counts, s.counts[i])
		if hasValues {
			sum.Values = append(sum.Values, s.vals[i*dim:(i+1)*dim]...)
		}
	}
	if !hasValues {
		sum.Values = nil
	}
	if err := sum.Validate(b); err != nil {
		return nil, fmt.Errorf("protocol: secure sum: %w", err)
	}
	s.out[0] = sum
	return s.out[:], nil
}
