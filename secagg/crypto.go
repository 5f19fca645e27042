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
	// CiphertextSize is the size of EncryptedShare.Ciphertext: nonce,
	// two shares, GCM tag.
	CiphertextSize = nonceSize + 2*ShareSize + 16
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

func shareAD(round *[32]byte, from, to uint32) []byte {
	ad := make([]byte, 0, 40)
	ad = append(ad, round[:]...)
	ad = binary.BigEndian.AppendUint32(ad, from)
	return binary.BigEndian.AppendUint32(ad, to)
}

// sealShares encrypts the pair (mask-key share, self-mask share).
func sealShares(a cipher.AEAD, rand io.Reader, round *[32]byte, from, to uint32, maskShare, selfShare []byte) ([]byte, error) {
	out := make([]byte, nonceSize, CiphertextSize)
	if _, err := io.ReadFull(rand, out); err != nil {
		return nil, fmt.Errorf("secagg: nonce: %w", err)
	}
	pt := make([]byte, 0, 2*ShareSize)
	pt = append(append(pt, maskShare...), selfShare...)
	return a.Seal(out, out[:nonceSize], pt, shareAD(round, from, to)), nil
}

// openShares decrypts a ciphertext from sealShares.
func openShares(a cipher.AEAD, round *[32]byte, from, to uint32, ct []byte) (maskShare, selfShare []byte, err error) {
	if len(ct) != CiphertextSize {
		return nil, nil, fmt.Errorf("%w: share %d→%d has %d bytes, want %d", ErrAuth, from, to, len(ct), CiphertextSize)
	}
	pt, err := a.Open(nil, ct[:nonceSize], ct[nonceSize:], shareAD(round, from, to))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: share %d→%d", ErrAuth, from, to)
	}
	return pt[:ShareSize], pt[ShareSize:], nil
}
