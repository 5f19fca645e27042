package protocol

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
)

// TranscriptMagic identifies a transcript stream.
const TranscriptMagic = "privrec-transcript"

// TranscriptVersion is the version of the transcript format.
const TranscriptVersion = 1

// ErrTranscript is wrapped by errors about a malformed transcript.
var ErrTranscript = errors.New("protocol: bad transcript")

// TranscriptHeader heads a transcript.
type TranscriptHeader struct {
	Magic      string // TranscriptMagic
	Version    int    // TranscriptVersion
	Method     string // e.g. "hdpmf"
	Seed       uint64
	NumClients int
	Meta       map[string]string // free-form public run parameters
}

// Record is one round of a transcript: the broadcast the server sent and
// the uploads it received, in client order, without the clients that sent
// nothing.
type Record struct {
	Round     int
	Broadcast *Broadcast
	Uploads   []*Upload
}

// TranscriptWriter writes a transcript: a gob stream of one
// TranscriptHeader followed by one Record per round. A transcript holds
// exactly what the server sees, so attacks on a method can be tested on
// it.
type TranscriptWriter struct {
	enc *gob.Encoder
	buf []*Upload
}

// NewTranscriptWriter writes h (with Magic and Version filled in) to w.
func NewTranscriptWriter(w io.Writer, h TranscriptHeader) (*TranscriptWriter, error) {
	h.Magic, h.Version = TranscriptMagic, TranscriptVersion
	enc := gob.NewEncoder(w)
	if err := enc.Encode(&h); err != nil {
		return nil, fmt.Errorf("protocol: write transcript header: %w", err)
	}
	return &TranscriptWriter{enc: enc}, nil
}

// Write appends a round. Nil uploads are left out.
func (t *TranscriptWriter) Write(b *Broadcast, ups []*Upload) error {
	t.buf = t.buf[:0]
	for _, u := range ups {
		if u != nil {
			t.buf = append(t.buf, u)
		}
	}
	if err := t.enc.Encode(&Record{Round: b.Round, Broadcast: b, Uploads: t.buf}); err != nil {
		return fmt.Errorf("protocol: write transcript round %d: %w", b.Round, err)
	}
	return nil
}

// TranscriptReader reads a transcript written by TranscriptWriter.
type TranscriptReader struct {
	dec    *gob.Decoder
	header TranscriptHeader
	rounds int
}

// NewTranscriptReader reads and checks the header from r.
func NewTranscriptReader(r io.Reader) (*TranscriptReader, error) {
	t := &TranscriptReader{dec: gob.NewDecoder(r)}
	if err := t.dec.Decode(&t.header); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrTranscript, err)
	}
	if t.header.Magic != TranscriptMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrTranscript, t.header.Magic, TranscriptMagic)
	}
	if t.header.Version != TranscriptVersion {
		return nil, fmt.Errorf("%w: version %d, this reader knows %d", ErrTranscript, t.header.Version, TranscriptVersion)
	}
	return t, nil
}

// Header returns the transcript's header.
func (t *TranscriptReader) Header() TranscriptHeader { return t.header }

// Next returns the next round, or io.EOF after the last one.
func (t *TranscriptReader) Next() (*Record, error) {
	var rec Record
	if err := t.dec.Decode(&rec); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: record %d: %w", ErrTranscript, t.rounds, err)
	}
	t.rounds++
	if rec.Broadcast == nil {
		return nil, fmt.Errorf("%w: record %d has no broadcast", ErrTranscript, t.rounds-1)
	}
	return &rec, nil
}
