// Package health judges the health of live objects by CEL expressions, the way Flux's
// Kustomization `healthCheckExprs` do: for each apiVersion and kind, an expression that says the
// object is `current` (required), and optionally ones that say it has `failed` or is still
// `in_progress`. The expressions see the object's top-level fields as variables (`metadata`,
// `spec`, `status`, …), so `status.conditions.filter(e, e.type == 'Ready').all(e, e.status ==
// 'True')` reads as it does in Flux.
//
// Both delivery engines judge with the same expressions, and with the same code: delivering
// directly, the provider evaluates them here as it waits, with Flux's own library
// (fluxcd/pkg/runtime/cel's StatusEvaluator, the one kustomize-controller builds for each
// healthCheckExprs entry); through Flux they become each Kustomization's
// `spec.healthCheckExprs` and kustomize-controller evaluates them. One CEL environment, Flux's, so
// an expression means the same on both. The module is pinned at v0.111.0, the newest whose
// Kubernetes libraries are this provider's (v0.113.0 on needs k8s.io v0.37); its cel package is
// kustomize-controller v1.8's (fluxcd/pkg/runtime v0.117.0) but for string helpers added since.
//
// As in Flux, an object of a listed kind (matched by API group and kind, the version aside) is
// judged by its expressions instead of kstatus: first an object whose status.observedGeneration
// differs from metadata.generation is in progress (its controller has not seen the change yet);
// then in_progress, failed and current are evaluated in that order and the first that is true
// decides; none true is in progress. An expression that cannot be evaluated on the object (a
// field it reads is not there yet) is in progress too, with the error as the message (kstatus'
// Unknown to kustomize-controller, which waits on), so a wait runs until the timeout, as Flux's
// does: guard such fields with has() or optional access (`status.?conditions.orValue([])`).
//
// Compile is stricter than Flux, which only parses: it also compiles each expression in Flux's
// environment with the top-level fields Kubernetes objects have declared (variables), so that a
// name no object has (such as `self`, from Kubernetes' own CEL) or an expression that cannot
// give a bool is refused at plan rather than left in progress until the timeout.
//
// The package is part of the pure core: it knows live objects only as JSON-like maps.
package health

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	// eval is Flux's own evaluator of the rule, as kustomize-controller builds it: it decides.
	eval *fluxcel.StatusEvaluator
	rule Rule
	// inProgress is the rule's in_progress expression (nil without one), evaluated only to say
	// why an object Flux judged in progress is so.
	inProgress *fluxcel.Expression
}

// variables are the top-level fields of Kubernetes objects that Compile declares to check the
// expressions' names. Evaluation passes the whole object, as Flux does; an object lacking a
// field (no status yet) makes an expression that reads it fail to evaluate: in progress.
var variables = []string{
	"apiVersion", "kind", "metadata", "spec", "status",
	"data", "binaryData", "stringData", "type", "immutable", // ConfigMap, Secret
	"rules", "subjects", "roleRef", "aggregationRule", // RBAC
	"webhooks", "secrets", "imagePullSecrets", // admission webhooks, ServiceAccount
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
		k, err := compileRule(i, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.kinds[key] = k
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// compileRule checks rule i's expressions (each an *ExprError when refused) and builds Flux's
// evaluator of it.
func compileRule(i int, r Rule) (*compiled, error) {
	var errs []error
	for _, f := range []struct {
		name, text string
		required   bool
	}{{"in_progress", r.InProgress, false}, {"failed", r.Failed, false}, {"current", r.Current, true}} {
		if strings.TrimSpace(f.text) == "" {
			if f.required {
				errs = append(errs, &ExprError{Rule: i, Field: f.name, Err: errors.New("required")})
			}
			continue
		}
		if err := CompileExpr(f.text); err != nil {
			errs = append(errs, &ExprError{Rule: i, Field: f.name, Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Blank optional expressions are left out, as Flux leaves out empty ones.
	exprs := kustomize.HealthCheckExpressions{Current: r.Current}
	if strings.TrimSpace(r.Failed) != "" {
		exprs.Failed = r.Failed
	}
	k := &compiled{rule: r}
	if strings.TrimSpace(r.InProgress) != "" {
		exprs.InProgress = r.InProgress
		x, err := fluxcel.NewExpression(r.InProgress)
		if err != nil {
			return nil, &ExprError{Rule: i, Field: "in_progress", Err: err}
		}
		k.inProgress = x
	}
	se, err := fluxcel.NewStatusEvaluator(&exprs)
	if err != nil {
		return nil, fmt.Errorf("rule %d: %w", i, err)
	}
	k.eval = se
	return k, nil
}

// CompileExpr checks one expression (also a plan-time validator): first as kustomize-controller
// takes it (Flux's NewExpression parses it in Flux's environment), then compiled in that
// environment with the objects' top-level fields declared. Flux can only declare them as
// google.protobuf.Struct, narrower than Kubernetes' fields (`webhooks` is a list, `type` a
// string), so of the second step only two findings are refusals: a name no object has, and a
// result that is certainly not a bool (a concrete type, not dyn or the Struct itself).
func CompileExpr(text string) error {
	if _, err := fluxcel.NewExpression(text); err != nil {
		return issues(text, err)
	}
	_, err := fluxcel.NewExpression(text, fluxcel.WithCompile(), fluxcel.WithStructVariables(variables...),
		fluxcel.WithOutputType(cel.BoolType))
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "undeclared reference") {
		return issues(text, err)
	}
	if _, got, ok := strings.Cut(msg, "expected bool, got "); ok && got != "dyn" && got != "map(string, dyn)" {
		return fmt.Errorf("gives %s, not bool", got)
	}
	return nil
}

// issues is Flux's parse error without its preamble, which repeats the expression a diagnostic
// already names: CEL's issues, with the position marked.
func issues(text string, err error) error {
	msg, ok := strings.CutPrefix(err.Error(), fmt.Sprintf("failed to parse the CEL expression '%s': ", text))
	if !ok {
		return err
	}
	return errors.New(msg)
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
// judges the object then). Flux's StatusEvaluator gives the verdict; Judge adds why. ctx bounds
// the evaluation (CEL checks it every 100 steps), as it bounds the read of obj.
func (c *Checker) Judge(ctx context.Context, obj map[string]any) (v Verdict, ok bool) {
	if c.Empty() {
		return Verdict{}, false
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	k := c.kinds[groupKind(apiVersion, kind)]
	if k == nil {
		return Verdict{}, false
	}
	res, err := k.eval.Evaluate(ctx, &unstructured.Unstructured{Object: obj})
	if err != nil {
		// kstatus' Unknown to kustomize-controller, which waits on.
		return Verdict{Status: InProgress, Message: fmt.Sprintf("health expressions cannot be evaluated yet: %v", err)}, true
	}
	switch res.Status {
	case status.FailedStatus:
		return Verdict{Status: Failed, Message: fmt.Sprintf("health expression failed `%s` is true", k.rule.Failed)}, true
	case status.CurrentStatus:
		return Verdict{Status: Current, Message: fmt.Sprintf("health expression current `%s` is true", k.rule.Current)}, true
	}
	return Verdict{Status: InProgress, Message: k.whyInProgress(ctx, obj)}, true
}

// whyInProgress says why Flux's evaluator found obj in progress: its generation not observed,
// the in_progress expression true, or current not true yet.
func (k *compiled) whyInProgress(ctx context.Context, obj map[string]any) string {
	gen, ok1, _ := unstructured.NestedInt64(obj, "metadata", "generation")
	seen, ok2, _ := unstructured.NestedInt64(obj, "status", "observedGeneration")
	if ok1 && ok2 && gen != seen {
		how := "is behind"
		if seen > gen {
			how = "differs from"
		}
		return fmt.Sprintf("status.observedGeneration %d %s metadata.generation %d", seen, how, gen)
	}
	if k.inProgress != nil {
		if yes, err := k.inProgress.EvaluateBoolean(ctx, obj); err == nil && yes {
			return fmt.Sprintf("health expression in_progress `%s` is true", k.rule.InProgress)
		}
	}
	return fmt.Sprintf("health expression current `%s` is not true yet", k.rule.Current)
}
