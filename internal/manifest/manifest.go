// Package manifest parses multi-document YAML into Kubernetes objects and names their normalized
// content by a short hash (the revision). The same objects in any order or formatting give the
// same revision, so a plan can show the revision before anything is applied.
package manifest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// RevisionLength is the number of hex digits of the content hash that name a revision.
const RevisionLength = 12

// DocumentError says which YAML document (1-based, counting every `---` separated part) is wrong.
type DocumentError struct {
	Index int
	Err   error
}

func (e *DocumentError) Error() string { return fmt.Sprintf("document %d: %v", e.Index, e.Err) }
func (e *DocumentError) Unwrap() error { return e.Err }

// Set is a parsed, normalized bundle of objects, sorted in a canonical order.
type Set struct {
	Objects []*unstructured.Unstructured
}

// Parse splits multi-document YAML and decodes each non-empty document into an object. `List`
// kinds are flattened. Objects must carry apiVersion, kind and metadata.name, and appear once.
func Parse(text string) (*Set, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var objects []*unstructured.Unstructured
	seen := map[string]int{}
	for index := 1; ; index++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &DocumentError{Index: index, Err: err}
		}
		if isBlank(doc) {
			continue
		}
		content, err := decode(doc)
		if err != nil {
			return nil, &DocumentError{Index: index, Err: err}
		}
		if content == nil {
			continue
		}
		found, err := objectsOf(content)
		if err != nil {
			return nil, &DocumentError{Index: index, Err: err}
		}
		for _, obj := range found {
			key := Key(obj)
			if first, dup := seen[key]; dup {
				return nil, &DocumentError{Index: index, Err: fmt.Errorf("%s is already defined in document %d", key, first)}
			}
			seen[key] = index
			objects = append(objects, obj)
		}
	}
	sort.SliceStable(objects, func(i, j int) bool { return Key(objects[i]) < Key(objects[j]) })
	return &Set{Objects: objects}, nil
}

func objectsOf(content map[string]any) ([]*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: content}
	if obj.IsList() {
		list, err := obj.ToList()
		if err != nil {
			return nil, fmt.Errorf("invalid List: %w", err)
		}
		var out []*unstructured.Unstructured
		for i := range list.Items {
			item := list.Items[i]
			if err := validate(&item); err != nil {
				return nil, fmt.Errorf("List item %d: %w", i+1, err)
			}
			out = append(out, &item)
		}
		return out, nil
	}
	if err := validate(obj); err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{obj}, nil
}

func validate(obj *unstructured.Unstructured) error {
	switch {
	case obj.GetAPIVersion() == "":
		return errors.New("apiVersion is missing")
	case obj.GetKind() == "":
		return errors.New("kind is missing")
	case obj.GetName() == "" && obj.GetGenerateName() == "":
		return fmt.Errorf("%s has no metadata.name", obj.GetKind())
	case obj.GetName() == "":
		return fmt.Errorf("%s uses metadata.generateName, which cannot be applied idempotently; set metadata.name", obj.GetKind())
	}
	return nil
}

// Key identifies an object within a set by its Identity, as "group/kind namespace/name".
func Key(obj *unstructured.Unstructured) string { return IdentityOf(obj).key() }

// Canonical returns the set as canonical JSON: objects in key order, map keys sorted.
func (s *Set) Canonical() ([]byte, error) {
	contents := make([]map[string]any, len(s.Objects))
	for i, obj := range s.Objects {
		contents[i] = obj.Object
	}
	// encoding/json writes map keys sorted, which makes the encoding canonical.
	return json.Marshal(contents)
}

// Revision names the set's content by the first RevisionLength hex digits of its SHA-256.
func (s *Set) Revision() (string, error) {
	canonical, err := s.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:RevisionLength], nil
}

// Revision parses text and returns its revision name.
func Revision(text string) (string, error) {
	set, err := Parse(text)
	if err != nil {
		return "", err
	}
	return set.Revision()
}

func isBlank(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			return false
		}
	}
	return true
}

// decode turns one YAML document into JSON-compatible values, keeping integers as int64 (as
// Kubernetes' own decoders do) so that they round-trip unchanged through apply.
func decode(doc []byte) (map[string]any, error) {
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var value any
	if err := utiljson.Unmarshal(raw, &value); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	switch v := value.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("expected a Kubernetes object (a YAML mapping), got %T", value)
	}
}

// FromCanonical decodes what Canonical wrote back into a set (records keep revisions this way,
// so that a restore can apply a backup revision again).
func FromCanonical(canonical []byte) (*Set, error) {
	var contents []map[string]any
	if err := utiljson.Unmarshal(canonical, &contents); err != nil {
		return nil, fmt.Errorf("decode canonical manifests: %w", err)
	}
	set := &Set{Objects: make([]*unstructured.Unstructured, len(contents))}
	for i, c := range contents {
		set.Objects[i] = &unstructured.Unstructured{Object: c}
	}
	return set, nil
}
