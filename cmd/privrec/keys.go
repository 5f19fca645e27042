package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Ed25519 keys are stored as one line of standard base64: a private key
// as its 32-byte seed (mode 0600), a public key as its 32 bytes.

// writeNew creates path with data and mode perm, synced; it refuses to
// replace an existing file, which may be a key in use.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readEd25519Key reads a private key file (what names it in errors).
func readEd25519Key(what, path string) (ed25519.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s %s: want the base64 seed of an Ed25519 key", what, path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// readEd25519Pub reads a public key file (what names it in errors).
func readEd25519Pub(what, path string) (ed25519.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pub, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s %s: want a base64 Ed25519 public key", what, path)
	}
	return pub, nil
}

// writeKeyPair draws an Ed25519 key pair and writes it into dir (made
// 0700 if needed) as name.key (the seed, mode 0600) and name.pub, each
// with write: os.WriteFile, or writeNew to refuse replacing a key.
func writeKeyPair(dir, name string, write func(string, []byte, os.FileMode) error) (kf, pf string, err error) {
	if dir == "" {
		return "", "", errors.New("--out DIR is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	kf, pf = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := write(kf, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if err := write(pf, []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o644); err != nil {
		return "", "", err
	}
	return kf, pf, nil
}
