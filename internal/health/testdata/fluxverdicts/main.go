// Command fluxverdicts records the verdicts of Flux's own health check library
// (fluxcd/pkg/runtime/cel, as kustomize-controller evaluates healthCheckExprs) on the cases of
// ../flux_cases.json, into ../flux_verdicts.json, which internal/health's TestSameVerdictsAsFlux
// compares its own verdicts with. It is a module of its own, kept out of the provider's: run
// `go run .` here after changing the cases or the version of fluxcd/pkg/runtime in go.mod.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type testCase struct {
	Name string `json:"name"`
	Rule struct {
		Current    string `json:"current"`
		Failed     string `json:"failed"`
		InProgress string `json:"inProgress"`
	} `json:"rule"`
	Object json.RawMessage `json:"object"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	b, err := os.ReadFile("../flux_cases.json")
	if err != nil {
		return err
	}
	var cases []testCase
	if err := json.Unmarshal(b, &cases); err != nil {
		return err
	}
	out := map[string]string{}
	for _, c := range cases {
		se, err := fluxcel.NewStatusEvaluator(&kustomize.HealthCheckExpressions{
			Current: c.Rule.Current, Failed: c.Rule.Failed, InProgress: c.Rule.InProgress})
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(c.Object); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		res, err := se.Evaluate(context.Background(), u)
		if err != nil {
			// kstatus reports the object Unknown with the error: the wait goes on.
			out[c.Name] = "error"
			continue
		}
		out[c.Name] = res.Status.String()
	}
	b, err = json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile("../flux_verdicts.json", append(b, '\n'), 0o644)
}
