package protocol

import (
	"bytes"
	"encoding/gob"
	"fmt"
)

// EncodeSnapshot frames a Stateful server's state for MarshalBinary: a
// version byte, then the gob encoding of state (a struct of exported
// fields).
func EncodeSnapshot(version byte, state any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(version)
	err := gob.NewEncoder(&buf).Encode(state)
	return buf.Bytes(), err
}

// DecodeSnapshot reads data written by EncodeSnapshot with the same
// version into state. The caller checks the decoded shapes against its
// server before applying them.
func DecodeSnapshot(data []byte, version byte, state any) error {
	if len(data) == 0 || data[0] != version {
		return fmt.Errorf("not a version %d snapshot", version)
	}
	return gob.NewDecoder(bytes.NewReader(data[1:])).Decode(state)
}
