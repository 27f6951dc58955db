// Package sopsenc writes Kubernetes objects in SOPS's encrypted-document format, the data key
// wrapped for one age recipient: what Flux's kustomize-controller decrypts (spec.decryption,
// provider sops) before it applies them. SOPS's own packages bring every cloud KMS client with
// them; the format is small and written here (SOPS's aes/cipher.go, sops.go, stores).
//
// # Format
//
// Each object is encrypted on its own (kustomize-controller decrypts object by object, as JSON):
// a value is encrypted when a key on its path matches EncryptedRegex, as
// AES256-GCM with a 32-byte IV and the path joined by ":" plus ":" as additional data, written
// ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]; the object gets a `sops` key holding the age-wrapped
// data key, lastmodified, encrypted_regex, version and the MAC: SHA-512 over every value in
// document order (keys sorted, as kustomize-controller's JSON has them), in upper-case hex,
// encrypted like a value with lastmodified as additional data. Empty strings stay empty, as
// SOPS leaves them.
//
// # Determinism
//
// SOPS and age draw the data key, the IVs, age's file key, ephemeral key and nonce at random,
// which would give every plan another artifact digest. Here all of them are derived, by
// HMAC-SHA256 under labels, from a secret: HMAC-SHA256 keyed by the SHA-256 of the caller's
// plaintext (the whole sensitive content of the revision), over the recipient and the object's
// position. The ciphertext is then a function of (plaintext, recipient), like SIV or convergent
// encryption. What that reveals beyond random encryption is whether two encryptions hold the
// same content, and lets someone confirm a guess of the whole plaintext; the revision, a
// SHA-256 of the same content published as the artifact's tag and shown in the plan, reveals
// both already. Someone who does not know the whole plaintext cannot derive the secret, and so
// neither the data key nor age's ephemeral key; the recipient's private key is untouched. No IV
// repeats under one data key for different values: each is derived from the value's path and
// plaintext, and any change of the content changes the data key.
package sopsenc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// EncryptedRegex selects what is encrypted: a Secret's data and stringData, a ConfigMap's data
// and binaryData. Identity (apiVersion, kind, metadata) stays readable, so that kustomize can
// build the objects and the plan can name them.
const EncryptedRegex = "^(data|stringData|binaryData)$"

// LastModified is every document's lastmodified: fixed, as the artifact's creation stamp is.
const LastModified = "2000-01-01T00:00:00Z"

// Version is the SOPS format version written in the metadata.
const Version = "3.9.0"

var encryptedKey = regexp.MustCompile(EncryptedRegex)

// Encryptable reports whether the values of obj that matter are the ones EncryptedRegex
// encrypts: Secrets and ConfigMaps. Any other kind would be published with its content readable.
func Encryptable(obj map[string]any) bool {
	if obj["apiVersion"] != "v1" {
		return false
	}
	return obj["kind"] == "Secret" || obj["kind"] == "ConfigMap"
}

// Objects returns objs encrypted for recipient (an age X25519 recipient, "age1…"): copies, each
// with its sops metadata; objs are left as they are. The result is a function of the objects and
// the recipient (see the package doc). Errors name objects by position, never by content.
func Objects(objs []map[string]any, recipient string) ([]map[string]any, error) {
	pub, err := ParseRecipient(recipient)
	if err != nil {
		return nil, fmt.Errorf("age recipient: %w", err)
	}
	seed, err := seedOf(objs, recipient)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(objs))
	for i, obj := range objs {
		if !Encryptable(obj) {
			return nil, fmt.Errorf("object %d is a %v: only v1 Secrets and ConfigMaps can be encrypted", i+1, obj["kind"])
		}
		secret := derive(seed, "object", []byte(strconv.Itoa(i)))
		if out[i], err = encryptObject(obj, recipient, pub, secret); err != nil {
			return nil, fmt.Errorf("object %d: %w", i+1, err)
		}
	}
	return out, nil
}

// seedOf is the secret everything is derived from: keyed by the hash of the whole content.
func seedOf(objs []map[string]any, recipient string) ([]byte, error) {
	h := sha256.New()
	for _, obj := range objs {
		if err := canonical(h, obj); err != nil {
			return nil, err
		}
	}
	return derive(h.Sum(nil), "gradual sopsenc v1", []byte(recipient)), nil
}

// encryptObject is one object of Objects, its randomness derived from secret.
func encryptObject(obj map[string]any, recipient string, pub, secret []byte) (map[string]any, error) {
	if _, ok := obj["sops"]; ok {
		return nil, errors.New("it has a top-level `sops` key already")
	}
	e := &encrypter{dataKey: derive(secret, "data key"), ivKey: derive(secret, "iv"), mac: sha512.New()}
	enc, err := e.walk(obj, nil)
	if err != nil {
		return nil, err
	}
	encrypted, ok := enc.(map[string]any)
	if !ok {
		return nil, errors.New("the object is not a mapping")
	}
	mac, err := e.encryptValue(fmt.Sprintf("%X", e.mac.Sum(nil)), LastModified)
	if err != nil {
		return nil, err
	}
	wrapped, err := wrapAge(e.dataKey, pub, derive(secret, "age"))
	if err != nil {
		return nil, err
	}
	encrypted["sops"] = map[string]any{
		"age":             []any{map[string]any{"recipient": recipient, "enc": wrapped}},
		"lastmodified":    LastModified,
		"mac":             mac,
		"encrypted_regex": EncryptedRegex,
		"version":         Version,
	}
	return encrypted, nil
}

// encrypter walks one object as SOPS does: keys sorted, lists in order (their elements share
// the list's path), nulls left alone.
type encrypter struct {
	dataKey, ivKey []byte
	mac            hash.Hash
}

func (e *encrypter) walk(v any, path []string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, len(v))
		for _, k := range keys {
			w, err := e.walk(v[k], append(path[:len(path):len(path)], k))
			if err != nil {
				return nil, err
			}
			out[k] = w
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			w, err := e.walk(x, path)
			if err != nil {
				return nil, err
			}
			out[i] = w
		}
		return out, nil
	case nil:
		return nil, nil
	}
	return e.leaf(v, path)
}

// leaf adds v to the MAC and encrypts it if a key on its path matches EncryptedRegex.
func (e *encrypter) leaf(v any, path []string) (any, error) {
	text, typ, err := asText(v)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", strings.Join(path, "."), err)
	}
	_, _ = e.mac.Write([]byte(text))
	for _, k := range path {
		if encryptedKey.MatchString(k) {
			return e.encrypt(text, typ, strings.Join(path, ":")+":")
		}
	}
	return v, nil
}

// asText is v as SOPS writes it before encrypting or hashing it (ToBytes), and its type name.
func asText(v any) (string, string, error) {
	switch v := v.(type) {
	case string:
		return v, "str", nil
	case int64:
		return strconv.FormatInt(v, 10), "int", nil
	case int:
		return strconv.Itoa(v), "int", nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), "float", nil
	case bool:
		if v {
			return "True", "bool", nil
		}
		return "False", "bool", nil
	}
	return "", "", fmt.Errorf("a value of type %T cannot be encrypted", v)
}

// encryptValue encrypts a string as SOPS's cipher does, with additional data ad.
func (e *encrypter) encryptValue(text, ad string) (string, error) {
	return e.encrypt(text, "str", ad)
}

func (e *encrypter) encrypt(text, typ, ad string) (string, error) {
	if text == "" && typ == "str" {
		return "", nil // SOPS leaves empty strings as they are
	}
	block, err := aes.NewCipher(e.dataKey)
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, 32)
	if err != nil {
		return "", err
	}
	// The IV names the value (path, type, plaintext): another value never gets the same one.
	iv := derive(e.ivKey, "value", []byte(ad), []byte(typ), []byte(text))
	sealed := gcm.Seal(nil, iv, []byte(text), []byte(ad))
	tag := len(sealed) - gcm.Overhead()
	b64 := base64.StdEncoding
	return "ENC[AES256_GCM,data:" + b64.EncodeToString(sealed[:tag]) + ",iv:" + b64.EncodeToString(iv) +
		",tag:" + b64.EncodeToString(sealed[tag:]) + ",type:" + typ + "]", nil
}

// canonical writes obj's JSON (keys sorted by encoding/json) to w.
func canonical(w interface{ Write([]byte) (int, error) }, obj map[string]any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, 0))
	return err
}
