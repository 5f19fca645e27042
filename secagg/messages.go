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
}

// KeysBroadcast is round 0, server → client: the keys of the client's
// neighbours that advertised (the survivors U1 among its neighbours).
type KeysBroadcast struct {
	To   uint32
	Keys []AdvertiseKeys
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
