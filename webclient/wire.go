package webclient

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The messages below are the fields of gen/privrec/federation/v1 the
// browser reads and writes, in Connect's JSON encoding (protojson:
// lowerCamelCase names, bytes as base64, enums by name, zero values
// omitted). They are written by hand so that the wasm client needs
// neither protobuf nor connect-go (1.94 MB and 3.82 MB gzipped in the
// issue's measurements, against the 2 MB budget of the whole page).

// Hello is the server's public plan (HelloResponse).
type Hello struct {
	Method  string            `json:"method"`
	Config  map[string]string `json:"config"`
	Catalog struct {
		ItemIDs []string `json:"itemIds"`
		Titles  []string `json:"titles"`
	} `json:"catalog"`
	Scale struct {
		Min  float64 `json:"min"`
		Max  float64 `json:"max"`
		Step float64 `json:"step"`
	} `json:"scale"`
	TestMode    bool   `json:"testMode"`
	State       string `json:"state"`
	Round       int32  `json:"round"`
	Aggregation string `json:"aggregation"`
	Enrolled    int32  `json:"enrolled"`
	MinClients  int32  `json:"minClients"`
}

type enrollRequest struct {
	Code    string   `json:"code,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
}

type enrollResponse struct {
	Credentials []struct {
		ClientID uint32 `json:"clientId"`
		Token    string `json:"token"`
	} `json:"credentials"`
}

type getRoundRequest struct {
	After   int32  `json:"after"`
	Boot    string `json:"boot,omitempty"`
	Session string `json:"session,omitempty"`
	// Join offers the page to the cohort being gathered for the round
	// after After (a cohort run's gathering), sent only for a round the
	// page's participation limits allow.
	Join bool `json:"join,omitempty"`
}

type getRoundResponse struct {
	State      string      `json:"state"`
	Broadcast  *broadcast  `json:"broadcast"`
	Boot       string      `json:"boot"`
	SecAgg     *secaggPlan `json:"secagg"`
	EpsTotal   jfloat      `json:"epsTotal"`
	Delta      jfloat      `json:"delta"`
	Enrolled   int32       `json:"enrolled"`
	MinClients int32       `json:"minClients"`
	// Gathering is a cohort run's round being gathered (no broadcast
	// yet); InCohort whether the page is in that cohort, or in the open
	// round's.
	Gathering *gathering `json:"gathering"`
	InCohort  bool       `json:"inCohort"`
}

// gathering is a cohort round before it opens (Gathering).
type gathering struct {
	Round  int32  `json:"round"`
	Phase  string `json:"phase"`
	Cohort int32  `json:"cohort"`
	Taken  int32  `json:"taken"`
}

type secaggPlan struct {
	Order     []uint32 `json:"order"`
	Degree    uint32   `json:"degree"`
	Threshold uint32   `json:"threshold"`
	Bits      uint32   `json:"bits"`
	Words     uint32   `json:"words"`
	Seed      []byte   `json:"seed"`
	Session   string   `json:"session"`
	Active    bool     `json:"active"`
}

type broadcast struct {
	Round    int32             `json:"round"`
	Phase    string            `json:"phase"`
	Dim      int32             `json:"dim"`
	NumItems int32             `json:"numItems"`
	Items    []int32           `json:"items"`
	V        []jfloat          `json:"v"`
	Counts   []int32           `json:"counts"`
	Aux      []jfloat          `json:"aux"`
	AuxDim   int32             `json:"auxDim"`
	Params   map[string]jfloat `json:"params"`
	Words    int32             `json:"words"`
	Bits     int32             `json:"bits"`
}

// uploadRequest is a plain round's answer. The browser sends it only
// with no payload (a round it has nothing to add to, the final one): a
// sparse payload would carry the person's statistics in the clear.
type uploadRequest struct {
	Round int32 `json:"round"`
	Meta  struct {
		Seeded bool `json:"seeded"`
	} `json:"meta"`
}

type secaggRequest struct {
	Round   int32  `json:"round"`
	Session string `json:"session,omitempty"`

	Keys        *secaggKeys   `json:"keys,omitempty"`
	Shares      *secaggShares `json:"shares,omitempty"`
	Check       *secaggCheck  `json:"check,omitempty"`
	Masked      *maskedUpload `json:"masked,omitempty"`
	Consistency *secaggSig    `json:"consistency,omitempty"`
	Reveal      *secaggReveal `json:"reveal,omitempty"`
	Commit      *secaggCommit `json:"commit,omitempty"`
}

// secaggCommit is the active protocol's first step: a hiding commitment
// to the client's key advertisement (secagg.KeyCommit).
type secaggCommit struct {
	Position uint32 `json:"position"`
	Digest   []byte `json:"digest"`
}

type secaggKeys struct {
	Position uint32 `json:"position"`
	MaskKey  []byte `json:"maskKey,omitempty"`
	EncKey   []byte `json:"encKey,omitempty"`
	Cert     []byte `json:"cert,omitempty"`
	Sig      []byte `json:"sig,omitempty"`
	// Nonce opens the active protocol's commitment (secaggCommit).
	Nonce []byte `json:"nonce,omitempty"`
}

type secaggShares struct {
	Shares []secaggShare `json:"shares"`
}

type secaggShare struct {
	From       uint32 `json:"from"`
	To         uint32 `json:"to"`
	Ciphertext []byte `json:"ciphertext"`
}

type secaggCheck struct {
	Reported []uint32 `json:"reported,omitempty"`
}

type maskedUpload struct {
	ModulusBits uint32 `json:"modulusBits"`
	Data        []byte `json:"data"`
}

type secaggSig struct {
	Position uint32 `json:"position"`
	Sig      []byte `json:"sig"`
}

type secaggRevealed struct {
	Owner uint32 `json:"owner"`
	Share []byte `json:"share"`
}

type secaggReveal struct {
	SelfShares []secaggRevealed `json:"selfShares,omitempty"`
	MaskShares []secaggRevealed `json:"maskShares,omitempty"`
}

type secaggResponse struct {
	Keys *struct {
		Keys      []secaggKeys `json:"keys"`
		Committed []byte       `json:"committed"`
	} `json:"keys"`
	Shares *secaggShares `json:"shares"`
	Unmask *struct {
		Survivors  []uint32    `json:"survivors"`
		Dropped    []uint32    `json:"dropped"`
		Survived   []byte      `json:"survived"`
		Signatures []secaggSig `json:"signatures"`
	} `json:"unmask"`
	Excluded *struct {
		Excluded []uint32 `json:"excluded"`
	} `json:"excluded"`
	Done *struct{} `json:"done"`
	// Committed answers the active protocol's commitment: the hash of
	// the session's commitment set (secagg.CommitSetHash).
	Committed *struct {
		SetHash []byte `json:"setHash"`
	} `json:"committed"`
}

// getModelRequest asks for the final model or, with Interim, the newest
// release (the final model once the run is done).
type getModelRequest struct {
	Interim bool `json:"interim,omitempty"`
}

type getModelResponse struct {
	Model []byte `json:"model"`
}

// connectError is the body of a Connect error response.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// jfloat is a protojson float or double: a number, or one of the
// strings "NaN", "Infinity", "-Infinity" (or a number in a string).
type jfloat float64

func (f *jfloat) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN":
			*f = jfloat(math.NaN())
		case "Infinity":
			*f = jfloat(math.Inf(1))
		case "-Infinity":
			*f = jfloat(math.Inf(-1))
		default:
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("webclient: a float of %q", s)
			}
			*f = jfloat(x)
		}
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = jfloat(x)
	return nil
}
