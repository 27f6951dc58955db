package manifest

import (
	"errors"
	"strings"
	"testing"
)

const secret = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: demo}
stringData: {password: hunter2-very-secret}
`

func TestNoSecretsNamesTheSecretNeverItsData(t *testing.T) {
	err := NoSecrets(namespace+"---\n"+secret, "sensitive_manifests")
	var se *SecretsError
	if !errors.As(err, &se) {
		t.Fatalf("want a SecretsError, got %v", err)
	}
	if len(se.Keys) != 1 || se.Keys[0] != "/Secret demo/db" {
		t.Fatalf("keys = %v, want [/Secret demo/db]", se.Keys)
	}
	if msg := err.Error(); strings.Contains(msg, "hunter2") || !strings.Contains(msg, "sensitive_manifests") {
		t.Fatalf("message must name the attribute and hide the data: %s", msg)
	}
	if err := NoSecrets(namespace+"---\n"+deployment, "x"); err != nil {
		t.Fatalf("no Secret, yet %v", err)
	}
	// A Secret of another API group is not core/v1 Secret.
	if err := NoSecrets("apiVersion: example.com/v1\nkind: Secret\nmetadata: {name: s}\n", "x"); err != nil {
		t.Fatalf("example.com Secret refused: %v", err)
	}
}

func TestBundleRevisionCoversTheSensitiveHalf(t *testing.T) {
	revOf := func(public, sensitive string) string {
		t.Helper()
		set, err := Bundle(public, sensitive)
		if err != nil {
			t.Fatal(err)
		}
		rev, err := set.Revision()
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	a := revOf(namespace, secret)
	b := revOf(namespace, strings.Replace(secret, "hunter2", "hunter3", 1))
	if a == b {
		t.Fatal("a changed Secret value kept the revision")
	}
	// Where an object is written does not change what is applied, so not the revision either.
	if whole := revOf(namespace+"---\n"+secret, ""); whole != a {
		t.Fatalf("same objects split differently: %s vs %s", whole, a)
	}
	set, err := Bundle(namespace, secret)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Keys(), ","); got != "/Namespace /demo,/Secret demo/db" {
		t.Fatalf("keys = %s", got)
	}
}

func TestBundleRefusesAnObjectInBothHalves(t *testing.T) {
	_, err := Bundle(namespace, namespace)
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("want a duplicate error, got %v", err)
	}
}

func TestBundleWithholdsParserMessagesAboutSensitiveText(t *testing.T) {
	// The parser quotes what it failed on; of the sensitive half only the document is named.
	bad := "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData: {password: \"hunter2\n"
	_, err := Bundle(namespace, namespace+"---\n"+bad)
	if err == nil {
		t.Fatal("broken YAML accepted")
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "withheld") {
		t.Fatalf("error: %v", err)
	}
	var doc *DocumentError
	if !errors.As(err, &doc) || doc.Index != 2 {
		t.Fatalf("want document 2 named, got %v", err)
	}
	// Our own checks name no value and stay.
	_, err = Bundle(namespace, "apiVersion: v1\nkind: Secret\nmetadata: {}\n")
	if err == nil || !strings.Contains(err.Error(), "has no metadata.name") {
		t.Fatalf("error: %v", err)
	}
}
