// Package manifest parses multi-document YAML into Kubernetes objects and names their normalized
// content by a short hash (the revision). The same objects in any order or formatting give the
// same revision, so a plan can show the revision before anything is applied.
package manifest

import (
	"bufio"
	"bytes"
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

// DocumentError says which YAML document (1-based, counting every `---` separated part) is wrong,
// and, when it could be read, which object it holds.
type DocumentError struct {
	Index int
	// Object names the document's object by apiVersion, kind and name ("apps/v1 Deployment
	// web") where the error leaves them readable; often empty.
	Object string
	Err    error
}

func (e *DocumentError) Error() string {
	if e.Object != "" {
		return fmt.Sprintf("document %d (%s): %v", e.Index, e.Object, e.Err)
	}
	return fmt.Sprintf("document %d: %v", e.Index, e.Err)
}
func (e *DocumentError) Unwrap() error { return e.Err }

// Set is a parsed, normalized bundle of objects, sorted in a canonical order.
type Set struct {
	Objects []*unstructured.Unstructured
}

// Parse splits multi-document YAML and decodes each non-empty document into an object. `List`
// kinds are flattened. Objects must carry apiVersion, kind and metadata.name, and appear once;
// no mapping may give a key twice (see DuplicateKeyError).
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
			return nil, &DocumentError{Index: index, Err: &syntaxError{err}}
		}
		if isBlank(doc) {
			continue
		}
		content, err := decode(doc)
		if err != nil {
			docErr := &DocumentError{Index: index, Err: err}
			var dup *DuplicateKeyError
			if errors.As(err, &dup) && !dup.identifying() && content != nil {
				docErr.Object = describeObject(content)
			}
			return nil, docErr
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

// RevisionWith names the set together with settings that change what applying it does (the
// canonical form of ignore_fields): the same objects with other settings are another revision.
// With no settings it is Revision, so bundles without such settings keep their names.
func (s *Set) RevisionWith(settings []byte) (string, error) {
	if len(settings) == 0 {
		return s.Revision()
	}
	canonical, err := s.Canonical()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(canonical)
	h.Write([]byte{0})
	h.Write(settings)
	return hex.EncodeToString(h.Sum(nil))[:RevisionLength], nil
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
// Kubernetes' own decoders do) so that they round-trip unchanged through apply. A mapping that
// gives a key twice is a *DuplicateKeyError; the content is then returned as well (last key
// wins), so that the error can name the object.
func decode(doc []byte) (map[string]any, error) {
	// Strict and lenient conversion are one function with one output; strict mode only adds the
	// refusal of duplicate keys, so revisions are what they always were.
	raw, strictErr := yaml.YAMLToJSONStrict(doc)
	if strictErr != nil {
		var err error
		if raw, err = yaml.YAMLToJSON(doc); err != nil {
			return nil, &syntaxError{err}
		}
		if dupErr := duplicateError(doc, strictErr); dupErr != nil {
			content, _ := toObject(raw)
			return content, dupErr
		}
		return nil, &syntaxError{strictErr}
	}
	return toObject(raw)
}

// toObject decodes the JSON of one document into an object (nil for an empty document).
func toObject(raw []byte) (map[string]any, error) {
	var value any
	if err := utiljson.Unmarshal(raw, &value); err != nil {
		return nil, &syntaxError{err}
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

// IsSecret reports whether obj is a core/v1 Secret: its data must not reach anything Terraform
// shows or stores.
func IsSecret(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// Secrets lists the keys (see Key) of the Secrets in s, in set order.
func (s *Set) Secrets() []string {
	var out []string
	for _, obj := range s.Objects {
		if IsSecret(obj) {
			out = append(out, Key(obj))
		}
	}
	return out
}

// SecretsError says that manifests Terraform shows verbatim hold Secrets; it names them (never
// their data) and the attribute meant for them.
type SecretsError struct {
	Keys []string
	// Instead says where they go: an attribute name (e.g. "sensitive_manifests"), or, starting
	// with a space, advice of its own.
	Instead string
}

func (e *SecretsError) Error() string {
	msg := fmt.Sprintf("these manifests hold %s. Terraform prints manifests verbatim in plan output and stores them in state, "+
		"so Secrets are refused here:", strings.Join(e.Keys, ", "))
	if strings.HasPrefix(e.Instead, " ") {
		return msg + e.Instead
	}
	return msg + fmt.Sprintf(" move them to `%s`, which is write-only (never stored in plan or state) and still part "+
		"of the revision, so a changed Secret value still plans an update", e.Instead)
}

// NoSecrets returns a SecretsError when text parses and holds Secrets (nil otherwise, also on
// parse errors, which Parse reports).
func NoSecrets(text, instead string) error {
	set, err := Parse(text)
	if err != nil {
		return nil //nolint:nilerr // Parse's error is reported where the manifests are parsed; this check has nothing to add
	}
	if keys := set.Secrets(); len(keys) > 0 {
		return &SecretsError{Keys: keys, Instead: instead}
	}
	return nil
}

// Bundle parses the two halves of a bundle — public, which Terraform shows, and sensitive, which
// it never stores — into one set, so that the revision covers both: a changed Secret value is a
// new revision even though the value itself is never shown. An object may appear in only one
// half. Errors about sensitive name the document, never its content.
func Bundle(public, sensitive string) (*Set, error) {
	set, err := Parse(public)
	if err != nil {
		return nil, err
	}
	if sensitive == "" {
		return set, nil
	}
	hidden, err := Parse(sensitive)
	if err != nil {
		return nil, fmt.Errorf("sensitive manifests: %w", redact(err))
	}
	seen := map[string]bool{}
	for _, obj := range set.Objects {
		seen[Key(obj)] = true
	}
	for _, obj := range hidden.Objects {
		if seen[Key(obj)] {
			return nil, fmt.Errorf("%s is defined in both the manifests and the sensitive manifests", Key(obj))
		}
	}
	set.Objects = append(set.Objects, hidden.Objects...)
	sort.SliceStable(set.Objects, func(i, j int) bool { return Key(set.Objects[i]) < Key(set.Objects[j]) })
	return set, nil
}

// Keys lists the keys (see Key) of every object in s, in set order.
func (s *Set) Keys() []string {
	out := make([]string, len(s.Objects))
	for i, obj := range s.Objects {
		out[i] = Key(obj)
	}
	return out
}

// syntaxError is a YAML or JSON decoding error. Its message may quote the text it failed on.
type syntaxError struct{ err error }

func (e *syntaxError) Error() string { return "invalid YAML: " + e.err.Error() }
func (e *syntaxError) Unwrap() error { return e.err }

// redact drops the decoder's own words from err, which may quote a Secret's data; the document
// number and the checks of our own (kind, name, duplicate objects and keys) stay, as they name
// no value.
func redact(err error) error {
	var syntax *syntaxError
	if !errors.As(err, &syntax) {
		return err
	}
	var doc *DocumentError
	if errors.As(err, &doc) {
		return &DocumentError{Index: doc.Index, Err: errors.New("invalid YAML (the parser's message is withheld: it may quote the content)")}
	}
	return errors.New("invalid YAML (the parser's message is withheld: it may quote the content)")
}

// Documents renders each object as compact JSON (keys sorted), keyed by its Key. A plan shows
// this map instead of the bundle's text. Terraform and OpenTofu print a changed multi-line
// string whole, but they hide the unchanged elements of a map, and they render a string that is
// JSON as jsonencode(...), showing only the fields that change, with "# (N unchanged attributes
// hidden)" for the rest. Lists are the exception: a changed list element comes with its
// unchanged neighbours printed whole, which for a CRD's `versions` is thousands of lines. So a
// list that holds objects or lists is shown as an object keyed by position, and by name where
// its elements have one ("[0] v1beta1", "[1] v1beta2"), whose unchanged members are hidden like
// any others. A one-field edit of a 5,000-line CRD then plans a few dozen lines: the path to the
// field, not the object.
func Documents(objs []*unstructured.Unstructured) (map[string]string, error) {
	out := make(map[string]string, len(objs))
	for _, obj := range objs {
		doc, err := json.Marshal(shown(obj.Object))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Key(obj), err)
		}
		out[Key(obj)] = string(doc)
	}
	return out, nil
}

// shown is v as Documents shows it: every list that holds an object or a list becomes an object
// keyed by element (shownKeys); everything else as it is.
func shown(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = shown(e)
		}
		return out
	case []any:
		nested := false
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any:
				nested = true
			}
		}
		if !nested {
			return v
		}
		keys := shownKeys(v)
		out := make(map[string]any, len(v))
		for i, e := range v {
			out[keys[i]] = shown(e)
		}
		return out
	}
	return v
}

// shownKeys are the keys of a list's elements when it is shown as an object: "[i]", the position
// zero-padded so that the keys sort in the list's order, then " name" when every element is an
// object with a distinct, non-empty string `name` (containers, ports, a CRD's versions).
func shownKeys(list []any) []string {
	width := len(fmt.Sprint(len(list) - 1))
	names := make([]string, len(list))
	seen := map[string]bool{}
	named := true
	for i, e := range list {
		m, ok := e.(map[string]any)
		name, _ := m["name"].(string)
		if !ok || name == "" || seen[name] {
			named = false
			break
		}
		seen[name], names[i] = true, name
	}
	keys := make([]string, len(list))
	for i := range list {
		keys[i] = fmt.Sprintf("[%0*d]", width, i)
		if named {
			keys[i] += " " + names[i]
		}
	}
	return keys
}

// DocumentFromYAML turns an object's entry written by an earlier version (YAML, keys sorted, lists
// as they are) into what Documents writes now, for state upgrades; an entry that is JSON already
// is kept.
func DocumentFromYAML(doc string) (string, error) {
	if json.Valid([]byte(doc)) {
		return doc, nil
	}
	// Through JSON with numbers kept as written (not float64), then marshalled as Documents
	// does: the same keys, sorted the same way.
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var obj any
	if err := dec.Decode(&obj); err != nil {
		return "", err
	}
	out, err := json.Marshal(shown(obj))
	return string(out), err
}
