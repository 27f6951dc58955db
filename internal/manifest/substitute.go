package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/envsubst"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// SubstituteDisabled is the label or annotation that leaves an object's text as written, as
// Flux's kustomize-controller does (`kustomize.toolkit.fluxcd.io/substitute: disabled`): one
// bundle means the same under both engines.
const (
	SubstituteKey      = "kustomize.toolkit.fluxcd.io/substitute"
	SubstituteDisabled = "disabled"
)

// variableName is what Flux accepts as a variable name (postBuild.substitute keys).
var variableName = regexp.MustCompile(`^[_[:alpha:]][_[:alpha:][:digit:]]*$`)

// ValidVariableName reports whether name can be substituted: a letter or underscore, then
// letters, digits or underscores.
func ValidVariableName(name string) bool { return variableName.MatchString(name) }

// MissingVariablesError says which variables the bundle uses without a default (`${var}`, not
// `${var:=default}`) that the values do not give.
type MissingVariablesError struct {
	// Objects maps each object's Key to the variables it is missing, sorted.
	Objects map[string][]string
}

// Variables lists every missing variable once, sorted.
func (e *MissingVariablesError) Variables() []string {
	seen := map[string]bool{}
	var out []string
	for _, vars := range e.Objects {
		for _, v := range vars {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (e *MissingVariablesError) Error() string {
	keys := make([]string, 0, len(e.Objects))
	for k := range e.Objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s uses %s", k, strings.Join(e.Objects[k], ", "))
	}
	return fmt.Sprintf("variable %s not set and without a default (%s)", strings.Join(e.Variables(), ", "), strings.Join(parts, "; "))
}

// Substitute returns a copy of s with `${var}` references replaced by vars, object by object, the
// way Flux's postBuild.substitute does it (strict mode, github.com/fluxcd/pkg/envsubst): each
// object is written as YAML, substituted, and read back; `${var:=default}` and the other bash
// forms work, `$${var}` stays a literal `${var}`, and objects labelled or annotated
// `kustomize.toolkit.fluxcd.io/substitute: disabled` are left as written. Newlines are removed
// from values, as Flux does, so a value cannot add YAML of its own. A variable used without a
// default that vars does not give is a *MissingVariablesError naming every such variable.
func Substitute(s *Set, vars map[string]string) (*Set, error) {
	for name := range vars {
		if !ValidVariableName(name) {
			return nil, fmt.Errorf("variable name %q is invalid: it must match %s", name, variableName)
		}
	}
	clean := make(map[string]string, len(vars))
	for k, v := range vars {
		clean[k] = strings.ReplaceAll(v, "\n", "")
	}
	out := &Set{Objects: make([]*unstructured.Unstructured, 0, len(s.Objects))}
	missing := map[string][]string{}
	for _, obj := range s.Objects {
		if obj.GetLabels()[SubstituteKey] == SubstituteDisabled || obj.GetAnnotations()[SubstituteKey] == SubstituteDisabled {
			out.Objects = append(out.Objects, obj.DeepCopy())
			continue
		}
		rendered, absent, err := substituteObject(obj, clean)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Key(obj), err)
		}
		if len(absent) > 0 {
			missing[Key(obj)] = absent
			continue
		}
		out.Objects = append(out.Objects, rendered)
	}
	if len(missing) > 0 {
		return nil, &MissingVariablesError{Objects: missing}
	}
	for _, obj := range out.Objects {
		if err := validate(obj); err != nil {
			return nil, fmt.Errorf("after substitution: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, obj := range out.Objects {
		if seen[Key(obj)] {
			return nil, fmt.Errorf("after substitution, %s is defined twice", Key(obj))
		}
		seen[Key(obj)] = true
	}
	sort.SliceStable(out.Objects, func(i, j int) bool { return Key(out.Objects[i]) < Key(out.Objects[j]) })
	return out, nil
}

// substituteObject substitutes one object. The library stops at the first missing variable; to
// name them all, each one found is given an empty value and the text evaluated again, so the
// loop ends after at most one round per distinct variable.
func substituteObject(obj *unstructured.Unstructured, vars map[string]string) (*unstructured.Unstructured, []string, error) {
	text, err := yaml.Marshal(obj.Object)
	if err != nil {
		return nil, nil, err
	}
	var absent []string
	for {
		var lastMiss string
		output, err := envsubst.Eval(string(text), func(name string) (string, bool) {
			if v, ok := vars[name]; ok {
				return v, true
			}
			for _, a := range absent {
				if a == name {
					return "", true
				}
			}
			lastMiss = name
			return "", false
		})
		if err == nil {
			if len(absent) > 0 {
				sort.Strings(absent)
				return nil, absent, nil
			}
			content, err := decode([]byte(output))
			if err != nil {
				return nil, nil, fmt.Errorf("after substitution: %w", err)
			}
			return &unstructured.Unstructured{Object: content}, nil, nil
		}
		// A strict-mode miss is reported right after the lookup that missed; anything else
		// (a malformed expression) is the template's error.
		if lastMiss == "" || !strings.Contains(err.Error(), "variable not set") {
			return nil, nil, fmt.Errorf("variable substitution: %w", err)
		}
		absent = append(absent, lastMiss)
	}
}

// Digest names the content of a rendered set (its canonical JSON) by a short hash: what a
// cluster's record holds, compared with what the bundle renders for it now.
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:RevisionLength]
}

// IsMissingVariables reports whether err is (or wraps) a *MissingVariablesError, and returns it.
func IsMissingVariables(err error) (*MissingVariablesError, bool) {
	var m *MissingVariablesError
	ok := errors.As(err, &m)
	return m, ok
}
