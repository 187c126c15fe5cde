// Package seal is the hub's one way of sealing a value: AES-GCM under a
// fresh random nonce written before the ciphertext, bound to additional
// data that whoever opens it must name again. The secrets on disk, the
// fleet's keys and sealed values, input rounds and OAuth authorizations
// under way are all sealed here, so one implementation holds the format
// ("nonce || ciphertext") and the checks on opening.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
)

// ErrUnsealed is what Open answers for anything this key did not seal
// under this binding: too short, altered, another key, another binding.
// It says no more, so an opener cannot be used to learn which.
var ErrUnsealed = errors.New("seal: not sealed by this key for this binding")

// Box seals and opens under one key. It is safe for concurrent use.
type Box struct{ aead cipher.AEAD }

// New is a Box for key: 16, 24 or 32 bytes (AES-128, -192, -256).
func New(key []byte) (*Box, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain bound to binding, under a nonce of its own.
func (b *Box) Seal(plain, binding []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	nonce := make([]byte, n, n+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plain, binding), nil
}

// Open answers what Seal sealed under this key and binding, or
// ErrUnsealed.
func (b *Box) Open(sealed, binding []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrUnsealed
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], binding)
	if err != nil {
		return nil, ErrUnsealed
	}
	return plain, nil
}
