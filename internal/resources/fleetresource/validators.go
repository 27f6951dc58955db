// validators.go: the schema validators the provider's resources share: manifests that
// must parse, rollout limits, and durations. Each reports at plan time, before anything is applied.

package fleetresource

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fieldpath"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

type stringFunc struct {
	description string
	check       func(string) error
	summary     string
	// unplaced reports the error against the resource, naming the attribute in the detail:
	// Terraform prints the configuration lines of an attribute error, and for these
	// validators those lines may be the very Secret the error is about.
	unplaced bool
	// named starts the detail of an attribute error with the attribute's path, for entries of a
	// list whose configuration lines may not say which entry it is.
	named bool
}

func (v stringFunc) Description(context.Context) string         { return v.description }
func (v stringFunc) MarkdownDescription(context.Context) string { return v.description }

func (v stringFunc) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		if v.unplaced {
			resp.Diagnostics.AddError(v.summary, fmt.Sprintf("%s: %v", req.Path, err))
			return
		}
		detail := err.Error()
		if v.named {
			detail = fmt.Sprintf("%s: %v", req.Path, err)
		}
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, detail)
	}
}

// StringCheck is a validator of a string attribute: check reports what is wrong with a known
// value, as the detail of an error summary on the attribute; description says what it checks.
func StringCheck(description, summary string, check func(string) error) validator.String {
	return stringFunc{description: description, summary: summary, check: check}
}

// Manifests checks that a string is multi-document YAML of Kubernetes objects; the error names
// the document (1-based).
func Manifests() validator.String {
	return stringFunc{
		description: "must be multi-document YAML of Kubernetes objects, each with apiVersion, kind and metadata.name",
		summary:     "Invalid Manifests",
		check: func(s string) error {
			set, err := manifest.Parse(s)
			if err != nil {
				return err
			}
			if len(set.Objects) == 0 {
				return fmt.Errorf("the manifests hold no objects (only comments or empty documents)")
			}
			return nil
		},
	}
}

// SensitiveManifests is Manifests for a write-only attribute: its errors name the document but
// never quote it (a parser's message can quote the Secret data it failed on).
func SensitiveManifests() validator.String {
	return stringFunc{
		description: "must be multi-document YAML of Kubernetes objects, each with apiVersion, kind and metadata.name",
		summary:     "Invalid Sensitive Manifests",
		unplaced:    true,
		check: func(s string) error {
			set, err := manifest.Bundle("", s)
			if err != nil {
				return err
			}
			if len(set.Objects) == 0 {
				return fmt.Errorf("the sensitive manifests hold no objects (only comments or empty documents)")
			}
			return nil
		},
	}
}

// NoSecrets refuses manifests that hold Secrets: Terraform prints a configured string verbatim
// in plan output and stores it in state. instead names the write-only attribute for them.
func NoSecrets(instead string) validator.String {
	return stringFunc{
		description: "must hold no Secret (those go in `" + instead + "`)",
		summary:     "Secret In Manifests",
		unplaced:    true,
		check:       func(s string) error { return manifest.NoSecrets(s, instead) },
	}
}

// UpdateLimit checks `update_limit` with the engine's parser, so validation and execution agree.
func UpdateLimit() validator.String {
	return stringFunc{
		description: `a whole number ≥ 1 or a percentage from 1% to 100%`,
		summary:     "Invalid Update Limit",
		check:       func(s string) error { _, err := engine.ParseLimit(s); return err },
	}
}

// MaxFailures checks `max_failures` with the engine's parser.
func MaxFailures() validator.String {
	return stringFunc{
		description: `a whole number ≥ 0 or a percentage from 0% to 100%`,
		summary:     "Invalid Failure Budget",
		check:       func(s string) error { _, err := engine.ParseMaxFailures(s); return err },
	}
}

// MaxUnsettled checks `max_unsettled` with the engine's parser.
func MaxUnsettledValidator() validator.String {
	return stringFunc{
		description: `a whole number ≥ 0 or a percentage from 0% to 100%`,
		summary:     "Invalid Unsettled Budget",
		check:       func(s string) error { _, err := engine.ParseMaxUnsettled(s); return err },
	}
}

// Duration checks a Go duration string between least and most (most 0: no upper bound).
func Duration(least, most time.Duration) validator.String {
	desc := fmt.Sprintf("a duration such as \"30s\" or \"5m\", at least %s", least)
	if most > 0 {
		desc += fmt.Sprintf(" and at most %s", most)
	}
	return stringFunc{
		description: desc,
		summary:     "Invalid Duration",
		check: func(s string) error {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				return fmt.Errorf("%q is not a duration: use a number with a unit, such as \"30s\", \"5m\" or \"1h\"", s)
			case d < least:
				return fmt.Errorf("%q is shorter than %s", s, least)
			case most > 0 && d > most:
				return fmt.Errorf("%q is longer than %s", s, most)
			}
			return nil
		},
	}
}

// FieldPath checks that a string is a field path of ignore_fields (".spec.replicas",
// ".webhooks[*].clientConfig.caBundle"); see fieldpath.Parse.
func FieldPath() validator.String {
	return stringFunc{
		description: `must be a field path such as ".spec.replicas", ".webhooks[*].clientConfig.caBundle" or ` + "`.metadata.annotations[\"example.com/key\"]`",
		summary:     "Invalid Field Path",
		check: func(s string) error {
			_, err := fieldpath.Parse(s)
			return err
		},
	}
}
