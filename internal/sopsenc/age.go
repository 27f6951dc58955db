package sopsenc

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/hkdf"
)

// The age file that carries a SOPS data key, written here rather than by age.Encrypt: the
// library draws the file key, the ephemeral X25519 key and the payload nonce from crypto/rand,
// and the artifact's digest must follow from the planned content alone (see the package doc).
// The three are taken from the caller's derived secret instead; the format is age's v1
// (age-encryption.org/v1, one X25519 stanza), checked in the tests by age.Decrypt itself.

// ageLabel is the HKDF info of the X25519 stanza's wrapping key (age's x25519Label).
const ageLabel = "age-encryption.org/v1/X25519"

// bech32Charset is bech32's alphabet: an age recipient is "age1" and its key in it.
const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// ParseRecipient checks that s is an age X25519 recipient ("age1…") and returns its public key.
func ParseRecipient(s string) ([]byte, error) {
	// age's parser checks the encoding and the checksum; the key itself is not exported by it.
	if _, err := age.ParseX25519Recipient(s); err != nil {
		return nil, err
	}
	s = strings.ToLower(s)
	data := s[strings.LastIndexByte(s, '1')+1 : len(s)-6] // the checksum's six characters dropped
	var acc, bits uint
	out := make([]byte, 0, 32)
	for _, c := range data {
		v := strings.IndexRune(bech32Charset, c)
		if v < 0 {
			return nil, fmt.Errorf("invalid character %q in the recipient", c)
		}
		acc = acc<<5 | uint(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if len(out) != curve25519.PointSize {
		return nil, errors.New("the recipient does not hold an X25519 key")
	}
	return out, nil
}

// derive is HMAC-SHA256 of label under secret: one independent value per use.
func derive(secret []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write(p)
	}
	return m.Sum(nil)
}

func hkdf32(secret, salt []byte, info string) ([]byte, error) {
	out := make([]byte, 32)
	_, err := io.ReadFull(hkdf.New(sha256.New, secret, salt, []byte(info)), out)
	return out, err
}

// wrapAge is the armored age file holding plaintext for recipient (its X25519 public key), its
// randomness derived from secret.
func wrapAge(plaintext, recipient, secret []byte) (string, error) {
	fileKey := derive(secret, "age file key")[:16]
	ephemeral := derive(secret, "age ephemeral key")
	nonce := derive(secret, "age payload nonce")[:16]
	share, err := curve25519.X25519(ephemeral, curve25519.Basepoint)
	if err != nil {
		return "", err
	}
	shared, err := curve25519.X25519(ephemeral, recipient)
	if err != nil {
		return "", err // a low-order point: curve25519 refuses it
	}
	wrapKey, err := hkdf32(shared, append(append([]byte{}, share...), recipient...), ageLabel)
	if err != nil {
		return "", err
	}
	body, err := seal(wrapKey, make([]byte, chacha20poly1305.NonceSize), fileKey)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	// The 32 bytes of body are one line of 43 characters: shorter than a full line, as age asks.
	var hdr bytes.Buffer
	hdr.WriteString("age-encryption.org/v1\n-> X25519 " + b64.EncodeToString(share) + "\n" + b64.EncodeToString(body) + "\n---")
	macKey, err := hkdf32(fileKey, nil, "header")
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, macKey)
	m.Write(hdr.Bytes())
	hdr.WriteString(" " + b64.EncodeToString(m.Sum(nil)) + "\n")
	hdr.Write(nonce)
	// The payload is one final STREAM chunk (a data key is far under 64 KiB): counter 0, last flag.
	streamKey, err := hkdf32(fileKey, nonce, "payload")
	if err != nil {
		return "", err
	}
	chunkNonce := make([]byte, chacha20poly1305.NonceSize)
	chunkNonce[len(chunkNonce)-1] = 1
	payload, err := seal(streamKey, chunkNonce, plaintext)
	if err != nil {
		return "", err
	}
	hdr.Write(payload)
	var out bytes.Buffer
	w := armor.NewWriter(&out)
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return out.String(), nil
}

func seal(key, nonce, plaintext []byte) ([]byte, error) {
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, err
	}
	return aead.Seal(nil, nonce, plaintext, nil), nil
}
