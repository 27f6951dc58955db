package sopsenc

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
)

func secretObj() map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "db", "namespace": "app", "labels": map[string]any{"tier": "data"}},
		"type":       "Opaque",
		"data":       map[string]any{"password": base64.StdEncoding.EncodeToString([]byte("hunter2-plaintext")), "empty": ""},
		"stringData": map[string]any{"token": "tok-plaintext-9"},
		"immutable":  true,
	}
}

var encRE = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.*),iv:(.+),tag:(.+),type:(.+)\]$`)

// decryptValue is SOPS's cipher.Decrypt, for the test only.
func decryptValue(t *testing.T, key []byte, value, ad string) string {
	t.Helper()
	if value == "" {
		return ""
	}
	m := encRE.FindStringSubmatch(value)
	if m == nil {
		t.Fatalf("not a SOPS value: %q", value)
	}
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	iv := dec(m[2])
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := gcm.Open(nil, iv, append(dec(m[1]), dec(m[3])...), []byte(ad))
	if err != nil {
		t.Fatalf("open %q with additional data %q: %v", value, ad, err)
	}
	return string(plain)
}

// decryptObject is kustomize-controller's decryption of one object, for the test only: the data
// key from age, every value under a key matching encrypted_regex, and the MAC checked.
func decryptObject(t *testing.T, id *age.X25519Identity, obj map[string]any) map[string]any {
	t.Helper()
	// Through JSON, as kustomize-controller reads the object.
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	meta := doc["sops"].(map[string]any)
	delete(doc, "sops")
	stanza := meta["age"].([]any)[0].(map[string]any)
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(stanza["enc"].(string))), id)
	if err != nil {
		t.Fatalf("age: %v", err)
	}
	key, err := io.ReadAll(r)
	if err != nil || len(key) != 32 {
		t.Fatalf("data key: %v (%d bytes)", err, len(key))
	}
	re := regexp.MustCompile(meta["encrypted_regex"].(string))
	h := sha512.New()
	var walk func(v any, path []string) any
	walk = func(v any, path []string) any {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			// encoding/json's order, which is kustomize-controller's.
			sortStrings(keys)
			for _, k := range keys {
				v[k] = walk(v[k], append(path[:len(path):len(path)], k))
			}
			return v
		case []any:
			for i := range v {
				v[i] = walk(v[i], path)
			}
			return v
		case nil:
			return nil
		}
		encrypted := false
		for _, k := range path {
			encrypted = encrypted || re.MatchString(k)
		}
		if !encrypted {
			text, _, err := asText(v)
			if err != nil {
				t.Fatal(err)
			}
			h.Write([]byte(text))
			return v
		}
		plain := decryptValue(t, key, v.(string), strings.Join(path, ":")+":")
		h.Write([]byte(plain))
		return plain
	}
	walk(doc, nil)
	mac := decryptValue(t, key, meta["mac"].(string), meta["lastmodified"].(string))
	if got := fmt.Sprintf("%X", h.Sum(nil)); mac != got {
		t.Fatalf("MAC: stored %s, computed %s", mac, got)
	}
	return doc
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestRoundTripThroughAge(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	in := []map[string]any{secretObj(), {
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"},
		"data": map[string]any{"config": "cm-plaintext"},
	}}
	out, err := Objects(in, id.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	text, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{"hunter2", "aHVudGVyMi1wbGFpbnRleHQ", "tok-plaintext-9", "cm-plaintext"} {
		if bytes.Contains(text, []byte(plain)) {
			t.Errorf("the encrypted objects hold %q", plain)
		}
	}
	if !bytes.Contains(text, []byte(`"name":"db"`)) || !bytes.Contains(text, []byte(`"tier":"data"`)) {
		t.Errorf("identity and labels must stay readable: %s", text)
	}
	for i := range in {
		got := decryptObject(t, id, out[i])
		want, _ := json.Marshal(in[i])
		gotJSON, _ := json.Marshal(got)
		if !bytes.Equal(want, gotJSON) {
			t.Errorf("object %d decrypts to\n%s\nwant\n%s", i, gotJSON, want)
		}
	}
	if !reflect.DeepEqual(in[0], secretObj()) {
		t.Error("Objects changed its input")
	}
}

func TestDeterministicPerContentAndRecipient(t *testing.T) {
	a, _ := age.GenerateX25519Identity()
	b, _ := age.GenerateX25519Identity()
	enc := func(r string, objs ...map[string]any) string {
		out, err := Objects(objs, r)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(out)
		return string(j)
	}
	first := enc(a.Recipient().String(), secretObj())
	if again := enc(a.Recipient().String(), secretObj()); again != first {
		t.Error("the same content and recipient encrypt differently")
	}
	if other := enc(b.Recipient().String(), secretObj()); other == first {
		t.Error("another recipient gives the same ciphertext")
	}
	changed := secretObj()
	changed["stringData"].(map[string]any)["token"] = "tok-plaintext-10"
	c := enc(a.Recipient().String(), changed)
	// Any change of the content changes the data key: no value's ciphertext is kept.
	for _, v := range regexp.MustCompile(`ENC\[[^\]]+\]`).FindAllString(first, -1) {
		if strings.Contains(c, v) {
			t.Errorf("a ciphertext survives a change of the content: %s", v)
		}
	}
}

func TestRefusals(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	dep := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "x"}}
	if _, err := Objects([]map[string]any{dep}, id.Recipient().String()); err == nil || !strings.Contains(err.Error(), "Deployment") {
		t.Errorf("a Deployment: %v", err)
	}
	if _, err := Objects([]map[string]any{secretObj()}, "age1nope"); err == nil {
		t.Error("an invalid recipient was accepted")
	}
	withSops := secretObj()
	withSops["sops"] = map[string]any{}
	if _, err := Objects([]map[string]any{withSops}, id.Recipient().String()); err == nil {
		t.Error("an object with a sops key was accepted")
	}
}

func TestParseRecipient(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	pub, err := ParseRecipient(id.Recipient().String())
	if err != nil || len(pub) != 32 {
		t.Fatalf("%v, %d bytes", err, len(pub))
	}
	// The key decoded is the one age wraps for: an age file written to it opens with id.
	enc, err := wrapAge([]byte("data key"), pub, []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := age.Decrypt(armor.NewReader(strings.NewReader(enc)), id)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(r); string(got) != "data key" {
		t.Errorf("got %q", got)
	}
}
