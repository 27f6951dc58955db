// Package fieldpath parses the field paths that `ignore_fields` names (".spec.replicas",
// `.metadata.annotations["example.com/x"]`, ".webhooks[*].clientConfig.caBundle") and applies
// them to objects: remove what a path names, take its value from the live object, or tell
// whether a field manager's managed fields cover it. The syntax is the one drift reports use
// for changed fields, so a field a plan names as drifted can be pasted into ignore_fields as is.
package fieldpath

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

type kind int

const (
	field    kind = iota // .name or ["name"]
	index                // [3]
	anyIndex             // [*]
)

type segment struct {
	kind kind
	key  string
	i    int
}

// Path is a parsed field path. The zero Path names nothing.
type Path struct {
	text string
	segs []segment
}

// String is the path as written.
func (p Path) String() string { return p.text }

// Parse parses a field path: segments `.name`, `["any key"]` (a Go-quoted string, for keys
// with dots or slashes), `[N]` (a list index) and `[*]` (every element of a list). It must
// start with a field and end with one, and it must not name what identifies the object
// (apiVersion, kind, metadata other than labels and annotations).
func Parse(text string) (Path, error) {
	p := Path{text: text}
	if text == "" {
		return p, errors.New("empty path")
	}
	for rest := text; rest != ""; {
		switch rest[0] {
		case '.':
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			name := rest[1 : 1+end]
			if name == "" {
				return p, fmt.Errorf("%q: empty field name after '.' (at %q)", text, rest)
			}
			if strings.ContainsAny(name, `]" `) {
				return p, fmt.Errorf("%q: invalid field name %q; write keys with such characters as [\"key\"]", text, name)
			}
			p.segs = append(p.segs, segment{kind: field, key: name})
			rest = rest[1+end:]
		case '[':
			seg, n, err := bracket(rest)
			if err != nil {
				return p, fmt.Errorf("%q: %w", text, err)
			}
			p.segs = append(p.segs, seg)
			rest = rest[n:]
		default:
			return p, fmt.Errorf("%q: expected '.' or '[' at %q (paths start with '.', e.g. \".spec.replicas\")", text, rest)
		}
	}
	if p.segs[0].kind != field {
		return p, fmt.Errorf("%q: must start with a field, e.g. \".spec\"", text)
	}
	if p.segs[len(p.segs)-1].kind != field {
		return p, fmt.Errorf("%q: must end with a field, not a list element (ignore a field of the elements, e.g. \"[*].name\")", text)
	}
	switch first := p.segs[0].key; first {
	case "apiVersion", "kind":
		return p, fmt.Errorf("%q: %s identifies the object and cannot be ignored", text, first)
	case "metadata":
		if len(p.segs) < 2 || p.segs[1].kind != field || (p.segs[1].key != "labels" && p.segs[1].key != "annotations") {
			return p, fmt.Errorf("%q: of metadata, only labels and annotations can be ignored", text)
		}
	}
	return p, nil
}

// bracket parses one [...] segment at the start of s and returns it and its length.
func bracket(s string) (segment, int, error) {
	switch {
	case strings.HasPrefix(s, "[*]"):
		return segment{kind: anyIndex}, 3, nil
	case strings.HasPrefix(s, `["`):
		quoted, err := strconv.QuotedPrefix(s[1:])
		if err != nil {
			return segment{}, 0, fmt.Errorf("invalid quoted key at %q", s)
		}
		key, _ := strconv.Unquote(quoted)
		n := 1 + len(quoted)
		if key == "" || !strings.HasPrefix(s[n:], "]") {
			return segment{}, 0, fmt.Errorf("expected a non-empty [\"key\"] at %q", s)
		}
		return segment{kind: field, key: key}, n + 1, nil
	}
	end := strings.IndexByte(s, ']')
	if end < 0 {
		return segment{}, 0, fmt.Errorf("unclosed '[' at %q", s)
	}
	i, err := strconv.Atoi(s[1:end])
	if err != nil || i < 0 {
		return segment{}, 0, fmt.Errorf("expected [N], [*] or [\"key\"] at %q", s)
	}
	return segment{kind: index, i: i}, end + 1, nil
}

// Remove deletes every field p names from obj (a JSON-like object, e.g. Unstructured.Object).
// Emptied parents stay.
func (p Path) Remove(obj map[string]any) {
	take(obj, nil, false, p.segs)
}

// KeepLive makes every field p names in obj take the value live has at the same place, and
// removes it from obj where live has none. Fields that obj does not set stay unset. List
// elements are matched by position.
func (p Path) KeepLive(obj, live map[string]any) {
	take(obj, live, live != nil, p.segs)
}

// take rewrites, under dst, the fields segs names: to src's value there when src has one
// (have), deleting them otherwise. It returns dst's new value and whether to keep it.
func take(dst, src any, have bool, segs []segment) (any, bool) {
	if len(segs) == 0 {
		if !have {
			return nil, false
		}
		return runtime.DeepCopyJSONValue(src), true
	}
	s := segs[0]
	if s.kind == field {
		m, ok := dst.(map[string]any)
		if !ok {
			return dst, true
		}
		v, ok := m[s.key]
		if !ok {
			return dst, true
		}
		sm, _ := src.(map[string]any)
		sv, sok := sm[s.key]
		if nv, keep := take(v, sv, have && sok, segs[1:]); keep {
			m[s.key] = nv
		} else {
			delete(m, s.key)
		}
		return dst, true
	}
	l, ok := dst.([]any)
	if !ok {
		return dst, true
	}
	sl, _ := src.([]any)
	for i := range l {
		if s.kind == index && i != s.i {
			continue
		}
		var sv any
		sok := i < len(sl)
		if sok {
			sv = sl[i]
		}
		// Paths end with a field, so an element itself is never removed (keep is always true).
		l[i], _ = take(l[i], sv, have && sok, segs[1:])
	}
	return dst, true
}

// OwnedIn reports whether the managed fields of one field manager (the decoded FieldsV1 of a
// managedFields entry: {"f:spec": {"f:replicas": {}}}) cover what p names. List elements are
// matched whatever their key ("k:{...}", "v:...", "i:N"): a manager that owns the field in any
// element counts as owning it. A field owned whole (atomic, listed without children) counts too.
func (p Path) OwnedIn(fields map[string]any) bool {
	return len(fields) > 0 && owned(fields, p.segs)
}

func owned(node map[string]any, segs []segment) bool {
	if len(segs) == 0 {
		return true
	}
	if len(node) == 0 {
		return true // owned as a whole: an atomic field has no children listed
	}
	s := segs[0]
	if s.kind == field {
		child, ok := node["f:"+s.key].(map[string]any)
		return ok && owned(child, segs[1:])
	}
	for k, v := range node {
		if child, ok := v.(map[string]any); ok && (strings.HasPrefix(k, "k:") || strings.HasPrefix(k, "v:") || strings.HasPrefix(k, "i:")) {
			if owned(child, segs[1:]) {
				return true
			}
		}
	}
	return false
}

// MustParse is Parse for paths known to be valid; it panics on error.
func MustParse(text string) Path {
	p, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return p
}

// Sets reports whether obj sets any field p names (for `sensitive_paths`: a value there must
// not be in manifests Terraform shows). A field set to null counts: it is still written out.
func (p Path) Sets(obj map[string]any) bool {
	found := false
	visit(obj, p.segs, func(any) { found = true })
	return found
}

// Values lists the values of the fields p names in obj, in document order.
func (p Path) Values(obj map[string]any) []any {
	var out []any
	visit(obj, p.segs, func(v any) { out = append(out, v) })
	return out
}

// visit calls fn with the value of every field under node that segs names.
func visit(node any, segs []segment, fn func(any)) {
	if len(segs) == 0 {
		fn(node)
		return
	}
	s := segs[0]
	if s.kind == field {
		m, ok := node.(map[string]any)
		if !ok {
			return
		}
		if v, ok := m[s.key]; ok {
			visit(v, segs[1:], fn)
		}
		return
	}
	l, ok := node.([]any)
	if !ok {
		return
	}
	for i, e := range l {
		if s.kind == anyIndex || i == s.i {
			visit(e, segs[1:], fn)
		}
	}
}
