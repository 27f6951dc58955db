package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
)

// Duplicate keys. A YAML mapping that gives a key twice is decoded by last-wins, so half of
// what was written is silently dropped; Kubernetes' strict decoding (the API server's
// fieldValidation=Strict, built on sigs.k8s.io/yaml's YAMLToJSONStrict) refuses it, and so does
// Parse. Which keys count as duplicates is decided by YAMLToJSONStrict itself (go-yaml v2's
// strict mode, the same rules Kubernetes applies, including a key that a YAML merge key `<<`
// already set); go-yaml v3's node tree only serves to say where the duplicate is.

// DuplicateKeyError says that a YAML mapping gives a key twice. It names the key and where it
// is, never a value.
type DuplicateKeyError struct {
	// Key is the duplicated key as written; Path the mapping holding it ("" for the document's
	// top level), as "spec.template.metadata.labels" or "spec.containers[0]".
	Key, Path string
	// FirstLine and Line are the lines (1-based, counted within the document) of the two
	// occurrences.
	FirstLine, Line int
	// Merged: one of them is set through a YAML merge key (`<<: *anchor`).
	Merged bool
	// detail is the strict decoder's own account when the node tree could not place the
	// duplicate (Key is then empty): "line 5: key true already set in map".
	detail string
}

func (e *DuplicateKeyError) Error() string {
	if e.Key == "" {
		return "duplicate key: " + e.detail
	}
	where := "at the top level"
	if e.Path != "" {
		where = "at " + e.Path
	}
	msg := fmt.Sprintf("duplicate key %q %s (lines %d and %d of the document)", e.Key, where, e.FirstLine, e.Line)
	if e.Merged {
		msg += "; one of them is set through a YAML merge key (<<), which strict decoding counts as a duplicate as well"
	}
	return msg
}

// identifying reports whether the duplicate is one of the fields that name the object
// (apiVersion, kind, metadata, metadata.name): the object is then not described by them.
func (e *DuplicateKeyError) identifying() bool {
	switch e.Path {
	case "":
		return e.Key == "" || e.Key == "apiVersion" || e.Key == "kind" || e.Key == "metadata"
	case "metadata":
		return e.Key == "name"
	}
	return false
}

// duplicateError explains why YAMLToJSONStrict refused doc, which YAMLToJSON accepted: the only
// extra failure of strict mode when decoding into untyped values is a key set twice. It returns
// nil when strictErr is not such a failure.
func duplicateError(doc []byte, strictErr error) error {
	var typeErr *yamlv2.TypeError
	if !errors.As(strictErr, &typeErr) {
		return nil
	}
	var details []string
	for _, e := range typeErr.Errors {
		if strings.HasSuffix(e, "already set in map") {
			details = append(details, e)
		}
	}
	if len(details) == 0 {
		return nil
	}
	if found := findDuplicate(doc); found != nil {
		return found
	}
	// Keys that differ in writing but not in value under YAML 1.1 (`yes` and `true`, `0x10` and
	// `16`) are duplicates to go-yaml v2 but not to v3: its words have to do.
	return &DuplicateKeyError{detail: strings.Join(details, "; ")}
}

// findDuplicate walks doc's node tree for a mapping that sets a key twice, in document order; nil
// when there is none (or doc does not parse as go-yaml v3 reads YAML).
func findDuplicate(doc []byte) *DuplicateKeyError {
	var root yamlv3.Node
	if yamlv3.Unmarshal(doc, &root) == nil {
		return dupNode(&root, "")
	}
	return nil // the caller reports the strict decoder's own words instead
}

func dupNode(n *yamlv3.Node, path string) *DuplicateKeyError {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			if found := dupNode(c, path); found != nil {
				return found
			}
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			if found := dupNode(c, path+"["+strconv.Itoa(i)+"]"); found != nil {
				return found
			}
		}
	case yamlv3.MappingNode:
		return dupMapping(n, path, map[string]dupSeen{}, map[*yamlv3.Node]bool{n: true}, true, false)
	}
	// An alias is checked where its anchor is defined.
	return nil
}

// dupSeen is a key already set in the mapping being checked.
type dupSeen struct {
	line   int
	merged bool
}

// dupMapping checks the keys of n, including those of the mappings it merges, against seen (the
// keys the mapping at path has set so far). Values are walked only when n is written here
// (walk), not reached through an alias; merged says n is merged into the mapping at path.
func dupMapping(n *yamlv3.Node, path string, seen map[string]dupSeen, merging map[*yamlv3.Node]bool, walk, merged bool) *DuplicateKeyError {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yamlv3.ScalarNode && k.ShortTag() == "!!merge" {
			for _, m := range mergedMappings(v) {
				if merging[m.node] {
					continue // a mapping merging itself: nothing new
				}
				merging[m.node] = true
				found := dupMapping(m.node, path, seen, merging, walk && m.inline, true)
				delete(merging, m.node)
				if found != nil {
					return found
				}
			}
			continue
		}
		id, text := keyIdentity(k)
		if first, dup := seen[id]; dup {
			return &DuplicateKeyError{Key: text, Path: path, FirstLine: first.line, Line: k.Line, Merged: first.merged || merged}
		}
		seen[id] = dupSeen{line: k.Line, merged: merged}
		if walk {
			if found := dupNode(v, joinPath(path, text)); found != nil {
				return found
			}
		}
	}
	return nil
}

// mergedMapping is a mapping a merge key names; inline when written in place rather than
// through an alias.
type mergedMapping struct {
	node   *yamlv3.Node
	inline bool
}

// mergedMappings lists what the value of a merge key merges: a mapping, an alias of one, or a
// sequence of those.
func mergedMappings(v *yamlv3.Node) []mergedMapping {
	switch v.Kind {
	case yamlv3.MappingNode:
		return []mergedMapping{{v, true}}
	case yamlv3.AliasNode:
		if v.Alias != nil && v.Alias.Kind == yamlv3.MappingNode {
			return []mergedMapping{{v.Alias, false}}
		}
	case yamlv3.SequenceNode:
		var out []mergedMapping
		for _, e := range v.Content {
			out = append(out, mergedMappings(e)...)
		}
		return out
	}
	return nil
}

// keyIdentity is what makes two keys the same (their decoded value, so that `1` and `"1"`
// differ as they do to the strict decoder) and the key's text for messages.
func keyIdentity(k *yamlv3.Node) (id, text string) {
	if k.Kind == yamlv3.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	var v any
	if k.Kind != yamlv3.ScalarNode || k.Decode(&v) != nil {
		return fmt.Sprintf("node %d:%d", k.Line, k.Column), k.Value
	}
	return fmt.Sprintf("%T %v", v, v), k.Value
}

var plainSegment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinPath appends key to path: "spec.replicas", or `metadata.annotations["example.com/a"]`
// for keys a dot would misread.
func joinPath(path, key string) string {
	if !plainSegment.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// describeObject names the object content holds by what of apiVersion, kind and metadata.name
// can be read ("apps/v1 Deployment web"); "" when none.
func describeObject(content map[string]any) string {
	var parts []string
	for _, s := range []any{content["apiVersion"], content["kind"], nameOf(content)} {
		if s, ok := s.(string); ok && s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func nameOf(content map[string]any) any {
	if meta, ok := content["metadata"].(map[string]any); ok {
		return meta["name"]
	}
	return nil
}
