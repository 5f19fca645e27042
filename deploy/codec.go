package deploy

import (
	"maps"

	fedv1 "github.com/privrec/privrec/gen/privrec/federation/v1"
	"github.com/privrec/privrec/protocol"
)

// toWireBroadcast converts b to its wire form. Slices are shared, not
// copied.
func toWireBroadcast(b *protocol.Broadcast) *fedv1.Broadcast {
	return &fedv1.Broadcast{
		Round: int32(b.Round), Phase: b.Phase, Dim: int32(b.Dim), NumItems: int32(b.NumItems),
		Items: b.Items, V: b.V, Counts: b.Counts, Aux: b.Aux, AuxDim: int32(b.AuxDim),
		Params: maps.Clone(b.Params), Words: int32(b.Words), Bits: int32(b.Bits),
	}
}

// fromWireBroadcast converts w back, with empty slices as nil, as the
// methods expect of absent fields, and validates the result.
func fromWireBroadcast(w *fedv1.Broadcast) (*protocol.Broadcast, error) {
	b := &protocol.Broadcast{
		Round: int(w.GetRound()), Phase: w.GetPhase(), Dim: int(w.GetDim()), NumItems: int(w.GetNumItems()),
		Items: nilIfEmpty(w.GetItems()), V: nilIfEmpty(w.GetV()), Counts: nilIfEmpty(w.GetCounts()),
		Aux: nilIfEmpty(w.GetAux()), AuxDim: int(w.GetAuxDim()), Params: w.GetParams(),
		Words: int(w.GetWords()), Bits: int(w.GetBits()),
	}
	if b.Params == nil {
		b.Params = map[string]float64{}
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// toWireUpload converts u (nil: nothing to send) to its wire form,
// copying the slices: the client may reuse u.
func toWireUpload(round int, u *protocol.Upload, seeded bool) *fedv1.UploadRequest {
	req := &fedv1.UploadRequest{Round: int32(round), Meta: &fedv1.UploadMeta{Seeded: seeded}}
	if u != nil {
		req.Payload = &fedv1.UploadRequest_Sparse{Sparse: &fedv1.SparseUpload{
			Items: clone(u.Items), Values: clone(u.Values), Counts: clone(u.Counts), Scalars: clone(u.Scalars),
		}}
	}
	return req
}

// fromWireUpload converts a sparse payload to an upload of client id, nil
// for an upload with no payload.
func fromWireUpload(id int, req *fedv1.UploadRequest) *protocol.Upload {
	s := req.GetSparse()
	if s == nil {
		return nil
	}
	return &protocol.Upload{
		Client: id, Round: int(req.GetRound()),
		Items: nilIfEmpty(s.GetItems()), Values: nilIfEmpty(s.GetValues()),
		Counts: nilIfEmpty(s.GetCounts()), Scalars: nilIfEmpty(s.GetScalars()),
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func clone[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append([]T(nil), s...)
}
