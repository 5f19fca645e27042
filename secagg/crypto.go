package secagg

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	// KeySize is the size of an X25519 public key in AdvertiseKeys.
	KeySize = 32
	// SeedSize is the size of the mask-key seed and the self-mask seed.
	SeedSize = 16
	// ShareSize is the size of one Shamir share (a Ristretto255 scalar).
	ShareSize = 32
	nonceSize = 12
	// commitSize is the size of the dealer's commitments that open an
	// EncryptedShare's ciphertext: one SHA-256 of each of the two shares.
	commitSize = 2 * sha256.Size
	// CiphertextSize is the size of EncryptedShare.Ciphertext: the
	// dealer's commitments to the two shares (in the clear, bound into
	// the AEAD's associated data), nonce, the two shares, GCM tag.
	CiphertextSize = commitSize + nonceSize + 2*ShareSize + 16
)

const label = "privrec/secagg/v1 "

// ErrAuth is returned (wrapped) when an encrypted share fails
// authentication: it was tampered with, or was not encrypted by the
// claimed sender for this recipient in this round.
var ErrAuth = errors.New("secagg: encrypted share failed authentication")

func derive32(secret []byte, info string) [32]byte {
	k, err := hkdf.Key(sha256.New, secret, nil, label+info, 32)
	if err != nil {
		panic(err)
	}
	return [32]byte(k)
}

// pairInfo encodes an HKDF info string for the ordered pair (a, b).
func pairInfo(what string, a, b uint32) string {
	var x [8]byte
	binary.BigEndian.PutUint32(x[:4], a)
	binary.BigEndian.PutUint32(x[4:], b)
	return label + what + string(x[:])
}

func key16(secret, salt []byte, info string) (k [16]byte) {
	b, err := hkdf.Key(sha256.New, secret, salt, info, 16)
	if err != nil {
		panic(err)
	}
	return [16]byte(b)
}

// maskKeyFromSeed derives the X25519 mask-agreement private key from the
// Shamir-shared seed.
func maskKeyFromSeed(seed *[SeedSize]byte, round *[32]byte) *ecdh.PrivateKey {
	b, err := hkdf.Key(sha256.New, seed[:], round[:], label+"mask key", 32)
	if err != nil {
		panic(err)
	}
	k, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		panic(err) // every 32-byte string is an X25519 private key
	}
	return k
}

// selfMaskKey is the PRG key of client u's self mask.
func selfMaskKey(seed *[SeedSize]byte, round *[32]byte, u uint32) [16]byte {
	return key16(seed[:], round[:], pairInfo("self mask", u, u))
}

// pairwiseKey is the PRG key of the mask between u and v, from their
// X25519 shared secret.
func pairwiseKey(priv *ecdh.PrivateKey, pub *ecdh.PublicKey, round *[32]byte, u, v uint32) ([16]byte, error) {
	s, err := priv.ECDH(pub)
	if err != nil {
		return [16]byte{}, fmt.Errorf("secagg: mask key agreement %d–%d: %w", u, v, err)
	}
	return key16(s, round[:], pairInfo("pairwise mask", min(u, v), max(u, v))), nil
}

// shareAEAD returns the AES-128-GCM cipher for shares sent from → to,
// given the X25519 shared secret of their encryption key pairs; the key
// depends on the direction and the round.
func shareAEAD(secret []byte, round *[32]byte, from, to uint32) cipher.AEAD {
	k := key16(secret, round[:], pairInfo("share encryption", from, to))
	blk, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // unreachable: the key length is fixed
	}
	a, err := cipher.NewGCM(blk)
	if err != nil {
		panic(err)
	}
	return a
}

// shareAD is the associated data of the share ciphertext from → to: the
// round, both positions and the dealer's commitments to the two shares,
// so a holder that opens the ciphertext has checked that the server holds
// the commitments the dealer made to it.
func shareAD(round *[32]byte, from, to uint32, commits []byte) []byte {
	ad := make([]byte, 0, 40+commitSize)
	ad = append(ad, round[:]...)
	ad = binary.BigEndian.AppendUint32(ad, from)
	ad = binary.BigEndian.AppendUint32(ad, to)
	return append(ad, commits...)
}

// Kinds of share, in a commitment.
const (
	kindMask = 'm' // a share of the mask-key seed
	kindSelf = 's' // a share of the self-mask seed
)

// shareCommit is the dealer's commitment to the share of kind it dealt
// from → to in a round: SHA-256 of a label, the round, the pair, the
// kind and the share. A share is a uniformly random scalar to everyone
// but the holder and the dealer, so its hash hides it; the server checks
// every share revealed in the unmasking against it.
func shareCommit(round *[32]byte, from, to uint32, kind byte, share []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(label + "share commitment\x00"))
	h.Write(round[:])
	var b [9]byte
	binary.BigEndian.PutUint32(b[:], from)
	binary.BigEndian.PutUint32(b[4:], to)
	b[8] = kind
	h.Write(b[:])
	h.Write(share)
	return [sha256.Size]byte(h.Sum(nil))
}

// sealShares encrypts the pair (mask-key share, self-mask share) after
// the dealer's commitments to them.
func sealShares(a cipher.AEAD, rand io.Reader, round *[32]byte, from, to uint32, maskShare, selfShare []byte) ([]byte, error) {
	cm := shareCommit(round, from, to, kindMask, maskShare)
	cs := shareCommit(round, from, to, kindSelf, selfShare)
	out := make([]byte, 0, CiphertextSize)
	out = append(append(out, cm[:]...), cs[:]...)
	out = out[:commitSize+nonceSize]
	if _, err := io.ReadFull(rand, out[commitSize:]); err != nil {
		return nil, fmt.Errorf("secagg: nonce: %w", err)
	}
	pt := make([]byte, 0, 2*ShareSize)
	pt = append(append(pt, maskShare...), selfShare...)
	return a.Seal(out, out[commitSize:], pt, shareAD(round, from, to, out[:commitSize])), nil
}

// openShares decrypts a ciphertext from sealShares and checks the shares
// against the dealer's commitments.
func openShares(a cipher.AEAD, round *[32]byte, from, to uint32, ct []byte) (maskShare, selfShare []byte, err error) {
	if len(ct) != CiphertextSize {
		return nil, nil, fmt.Errorf("%w: share %d→%d has %d bytes, want %d", ErrAuth, from, to, len(ct), CiphertextSize)
	}
	commits, nonce, body := ct[:commitSize], ct[commitSize:commitSize+nonceSize], ct[commitSize+nonceSize:]
	pt, err := a.Open(nil, nonce, body, shareAD(round, from, to, commits))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: share %d→%d", ErrAuth, from, to)
	}
	maskShare, selfShare = pt[:ShareSize], pt[ShareSize:]
	if shareCommit(round, from, to, kindMask, maskShare) != [sha256.Size]byte(commits[:sha256.Size]) ||
		shareCommit(round, from, to, kindSelf, selfShare) != [sha256.Size]byte(commits[sha256.Size:]) {
		return nil, nil, fmt.Errorf("%w: share %d→%d does not match its dealer's commitment", ErrAuth, from, to)
	}
	return maskShare, selfShare, nil
}
