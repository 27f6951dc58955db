// Package health judges the health of live objects by CEL expressions, the way Flux's
// Kustomization `healthCheckExprs` do: for each apiVersion and kind, an expression that says the
// object is `current` (required), and optionally ones that say it has `failed` or is still
// `in_progress`. The expressions see the object's top-level fields as variables (`metadata`,
// `spec`, `status`, …), so `status.conditions.filter(e, e.type == 'Ready').all(e, e.status ==
// 'True')` reads as it does in Flux.
//
// Both delivery engines judge with the same expressions: delivering directly, the provider
// evaluates them here as it waits; through Flux they become each Kustomization's
// `spec.healthCheckExprs` and kustomize-controller evaluates them. So that an expression means
// the same on both, evaluation follows fluxcd/pkg/runtime/cel (v0.117.0, which
// kustomize-controller uses): the same CEL environment (env), the program made from the parsed
// expression as Flux makes it, the whole object as the activation, and the same order. That
// module is not a dependency yet: every version the module proxy serves needs k8s.io v0.37 and
// controller-runtime v0.25, a minor ahead of this provider's; flux_test.go checks the verdicts
// against ones recorded with Flux's library (testdata/fluxverdicts).
//
// As in Flux, an object of a listed kind (matched by API group and kind, the version aside) is
// judged by its expressions instead of kstatus: first an object whose status.observedGeneration
// differs from metadata.generation is in progress (its controller has not seen the change yet);
// then in_progress, failed and current are evaluated in that order and the first that is true
// decides; none true is in progress. An expression that cannot be evaluated on the object (a
// field it reads is not there yet) is in progress too, with the error as the message, so a wait
// runs until the timeout, as Flux's does: guard such fields with has() or optional access
// (`status.?conditions.orValue([])`).
//
// Compile is stricter than Flux, which only parses: it also type-checks each expression against
// the top-level fields Kubernetes objects have (variables), so that a name no object has (such
// as `self`, from Kubernetes' own CEL) or an expression that cannot give a bool is refused at
// plan rather than left in progress until the timeout.
//
// The package is part of the pure core: it knows live objects only as JSON-like maps.
package health

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// Rule is one kind's expressions, as configured.
type Rule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	Failed     string `json:"failed,omitempty"`
	InProgress string `json:"inProgress,omitempty"`
}

// Statuses an object can be judged to have; the names are kstatus', so that a wait reports them
// alike.
const (
	Current    = "Current"
	Failed     = "Failed"
	InProgress = "InProgress"
)

// Verdict is what the expressions say of one object.
type Verdict struct {
	Status string
	// Message says which expression decided (or failed to evaluate, and why).
	Message string
}

// ExprError is an expression that does not compile: Rule is the index of its rule, Field the
// expression's field (current, failed, in_progress).
type ExprError struct {
	Rule  int
	Field string
	Err   error
}

func (e *ExprError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }
func (e *ExprError) Unwrap() error { return e.Err }

// Checker holds the compiled rules. The zero Checker, and a nil one, judge nothing.
type Checker struct {
	kinds map[string]*compiled // by groupKind
	rules []Rule
}

type compiled struct {
	inProgress, failed, current *expr
}

type expr struct {
	field, text string
	prg         cel.Program
}

// variables are the top-level fields of Kubernetes objects that Compile lets the expressions
// read. Evaluation passes the whole object, as Flux does; an object lacking a field (no status
// yet) makes an expression that reads it fail to evaluate: in progress.
var variables = []string{
	"apiVersion", "kind", "metadata", "spec", "status",
	"data", "binaryData", "stringData", "type", "immutable", // ConfigMap, Secret
	"rules", "subjects", "roleRef", "aggregationRule", // RBAC
	"webhooks", "secrets", "imagePullSecrets", // admission webhooks, ServiceAccount
}

// envOptions are the CEL environment of fluxcd/pkg/runtime/cel's NewExpression (v0.117.0), which
// kustomize-controller evaluates healthCheckExprs in: the same options, so that an expression
// means the same on both engines.
func envOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	}
}

// env is Flux's environment (envOptions) with variables declared for the plan-time check.
// Flux's own declares none: it parses, and evaluates with the object's fields.
func env() (*cel.Env, error) {
	opts := envOptions()
	for _, v := range variables {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	return cel.NewEnv(opts...)
}

// groupKind is the key of apiVersion and kind: Flux matches a rule by API group and kind.
func groupKind(apiVersion, kind string) string {
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	return group + "/" + kind
}

// Compile checks and compiles rules. Every expression must compile and give a bool; two rules
// for one apiVersion and kind are refused. The error is an *ExprError for an expression, a plain
// one otherwise, and joins every problem found.
func Compile(rules []Rule) (*Checker, error) {
	if len(rules) == 0 {
		return &Checker{}, nil
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	c := &Checker{kinds: map[string]*compiled{}, rules: append([]Rule(nil), rules...)}
	var errs []error
	for i, r := range rules {
		key := groupKind(r.APIVersion, r.Kind)
		if r.APIVersion == "" || r.Kind == "" {
			errs = append(errs, fmt.Errorf("rule %d: api_version and kind are required", i))
			continue
		}
		if _, dup := c.kinds[key]; dup {
			// Flux refuses the Kustomization then (one rule per API group and kind).
			errs = append(errs, fmt.Errorf("rule %d: a second rule for %s %s (rules are matched by API group and kind)", i, r.APIVersion, r.Kind))
			continue
		}
		var k compiled
		for _, f := range []struct {
			name, text string
			dst        **expr
			required   bool
		}{
			{"in_progress", r.InProgress, &k.inProgress, false},
			{"failed", r.Failed, &k.failed, false},
			{"current", r.Current, &k.current, true},
		} {
			if strings.TrimSpace(f.text) == "" {
				if f.required {
					errs = append(errs, &ExprError{Rule: i, Field: f.name, Err: errors.New("required")})
				}
				continue
			}
			x, err := compile(e, f.name, f.text)
			if err != nil {
				errs = append(errs, &ExprError{Rule: i, Field: f.name, Err: err})
				continue
			}
			*f.dst = x
		}
		c.kinds[key] = &k
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// CompileExpr checks one expression alone (for a plan-time validator).
func CompileExpr(text string) error {
	e, err := env()
	if err != nil {
		return err
	}
	_, err = compile(e, "", text)
	return err
}

// compile checks text in e (it must type-check and may give a bool) and makes its program as
// Flux's NewExpression does: from the parsed, unchecked expression, optimized, interruptible.
func compile(e *cel.Env, field, text string) (*expr, error) {
	checked, iss := e.Compile(text)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("gives %s, not bool", t)
	}
	parsed, iss := e.Parse(text)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := e.Program(parsed, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return &expr{field: field, text: text, prg: prg}, nil
}

// Empty reports whether c has no rules.
func (c *Checker) Empty() bool { return c == nil || len(c.kinds) == 0 }

// Judges reports whether c has a rule for apiVersion and kind.
func (c *Checker) Judges(apiVersion, kind string) bool {
	return !c.Empty() && c.kinds[groupKind(apiVersion, kind)] != nil
}

// Rules are the rules c was compiled from, in their order (through Flux they become the
// Kustomization's healthCheckExprs); nil for an empty Checker.
func (c *Checker) Rules() []Rule {
	if c.Empty() {
		return nil
	}
	return append([]Rule(nil), c.rules...)
}

// Judge applies the rule for obj's apiVersion and kind; ok is false when there is none (kstatus
// judges the object then).
func (c *Checker) Judge(obj map[string]any) (v Verdict, ok bool) {
	if c.Empty() {
		return Verdict{}, false
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	k := c.kinds[groupKind(apiVersion, kind)]
	if k == nil {
		return Verdict{}, false
	}
	if lag, gen, seen := generationLag(obj); lag {
		how := "is behind"
		if seen > gen {
			how = "differs from"
		}
		return Verdict{Status: InProgress, Message: fmt.Sprintf("status.observedGeneration %d %s metadata.generation %d", seen, how, gen)}, true
	}
	for _, x := range []struct {
		e      *expr
		status string
	}{{k.inProgress, InProgress}, {k.failed, Failed}, {k.current, Current}} {
		if x.e == nil {
			continue
		}
		holds, err := x.e.eval(obj)
		if err != nil {
			return Verdict{Status: InProgress, Message: fmt.Sprintf("health expression %s `%s` cannot be evaluated yet: %v", x.e.field, x.e.text, err)}, true
		}
		if holds {
			return Verdict{Status: x.status, Message: fmt.Sprintf("health expression %s `%s` is true", x.e.field, x.e.text)}, true
		}
	}
	return Verdict{Status: InProgress, Message: fmt.Sprintf("health expression current `%s` is not true yet", k.current.text)}, true
}

// eval evaluates x with obj's top-level fields as the variables, as Flux's EvaluateBoolean does.
func (x *expr) eval(obj map[string]any) (bool, error) {
	out, _, err := x.prg.ContextEval(context.Background(), obj)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("gave %v (%s), not a bool", out.Value(), out.Type().TypeName())
	}
	return bool(b), nil
}

// generationLag reports whether obj's status.observedGeneration and metadata.generation are
// both set and differ (Flux's test: its controller has not seen the object as it is).
func generationLag(obj map[string]any) (lag bool, gen, seen int64) {
	meta, _ := obj["metadata"].(map[string]any)
	st, _ := obj["status"].(map[string]any)
	g, ok1 := asInt(meta["generation"])
	o, ok2 := asInt(st["observedGeneration"])
	return ok1 && ok2 && o != g, g, o
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}
