package secagg

// Messages are plain structs with exported fields so that a transport can
// serialize them. "From" is always the sending client, "To" the client a
// server message is meant for.

// AdvertiseKeys is round 0, client → server: the client's two X25519
// public keys for this round.
type AdvertiseKeys struct {
	From uint32
	// MaskKey is the public key for pairwise mask agreement; its private
	// key is derived from a seed that is Shamir-shared.
	MaskKey []byte
	// EncKey is the public key for encrypting shares to neighbours.
	EncKey []byte
	// In the active protocol (Params.Active): the sender's certificate
	// (Certificate.Marshal) and its Ed25519 signature over the session
	// context, the round seed, its position, its client ID and both keys.
	Cert []byte
	Sig  []byte
	// Nonce, in the active protocol, is the NonceSize bytes the client's
	// KeyCommit hid (not signed: it only opens the commitment).
	Nonce []byte
}

// KeyCommit is the active protocol's first message, client → server: a
// hiding commitment to the client's AdvertiseKeys (Client.Commit). The
// server answers every committed client with the hash of the set of
// commitments (CommitSetHash) before any advertisement is revealed.
type KeyCommit struct {
	From   uint32
	Digest [32]byte
}

// KeysBroadcast is round 0, server → client: the keys of the client's
// neighbours that advertised (the survivors U1 among its neighbours).
type KeysBroadcast struct {
	To   uint32
	Keys []AdvertiseKeys
	// Committed, in the active protocol, is the opened commitment set:
	// the digest and nonce of every committed advertisement, sorted by
	// position. It must hash to the commitment set the client saw before
	// revealing (CommitSetHash), and the graph seed is its hash
	// (GraphSeed); the client checks its own entry and each neighbour's
	// against the keys it receives.
	Committed []Commitment
}

// EncryptedShare carries, from one client to one neighbour, AES-GCM
// encrypted shares of the sender's mask-key seed and self-mask seed.
type EncryptedShare struct {
	From, To   uint32
	Ciphertext []byte
}

// ShareKeys is round 1, client → server: one EncryptedShare for every
// neighbour in the client's KeysBroadcast.
type ShareKeys struct {
	From   uint32
	Shares []EncryptedShare
}

// SharesDelivery is round 1, server → client: the shares addressed to the
// client by neighbours that completed ShareKeys (U2). After the optional
// check round, Excluded names the client's neighbours that the server
// excluded (some client reported their shares as failing
// authentication): the client treats them as dropped.
type SharesDelivery struct {
	To       uint32
	Shares   []EncryptedShare
	Excluded []uint32
}

// ShareCheck is the optional round 2a, client → server: the neighbours
// whose shares failed authentication (sorted).
type ShareCheck struct {
	From     uint32
	Reported []uint32
}

// MaskedInput is round 2, client → server: the masked vector y_u.
type MaskedInput struct {
	From uint32
	Y    []uint32
}

// UnmaskRequest is round 3, server → client: which of the client's
// neighbours survived (sent MaskedInput, U3) and which dropped after
// sharing their keys (U2 \ U3).
type UnmaskRequest struct {
	To        uint32
	Survivors []uint32
	Dropped   []uint32
	// In the active protocol: Survived is the set U3 as a bitmap over
	// positions (bit v%8 of byte v/8), which the client signs
	// (Client.Consistency); Signatures are its neighbours' signatures of
	// the survivor sets they were told of, delivered after the
	// consistency round for Client.Unmask to verify.
	Survived   []byte
	Signatures []SurvivorSig
}

// SurvivorSig is the active protocol's consistency round, client →
// server: the client's Ed25519 signature over the survivor set it was
// told of (UnmaskRequest.Survived).
type SurvivorSig struct {
	From uint32
	Sig  []byte
}

// RevealedShare is the recipient's share of one neighbour's seed.
type RevealedShare struct {
	Owner uint32
	Share []byte
}

// UnmaskResponse is round 3, client → server: shares of the self-mask
// seeds of surviving neighbours and of the mask-key seeds of dropped
// ones; never both kinds for the same neighbour.
type UnmaskResponse struct {
	From       uint32
	SelfShares []RevealedShare
	MaskShares []RevealedShare
}
