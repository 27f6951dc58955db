// Package functions implements the provider's functions (provider::gradual::revision).
package functions

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/function"

	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// NewRevision returns the `revision` function.
func NewRevision() function.Function { return &revision{} }

type revision struct{}

func (revision) Metadata(_ context.Context, _ function.MetadataRequest, resp *function.MetadataResponse) {
	resp.Name = "revision"
}

func (revision) Definition(_ context.Context, _ function.DefinitionRequest, resp *function.DefinitionResponse) {
	resp.Definition = function.Definition{
		Summary: "Revision name of a multi-document YAML manifest",
		MarkdownDescription: "Returns the revision name that `gradual_rollout` gives these manifests, and `gradual_module_assignment` a " +
			"module with them (its `revisions`): the first " +
			"12 hex digits of the SHA-256 of the normalized objects (sorted by group, kind, namespace and name; " +
			"canonical JSON). The same objects in any order or formatting give the same revision; comments and " +
			"empty documents do not count. Invalid YAML, or a document that is not a Kubernetes object, is an " +
			"error naming the document (1-based). It is the resource's revision only for plain manifests: a rollout or module " +
			"whose revision also covers `sensitive_manifests`, `values`, `ignore_fields`, `sensitive_paths`, `default_namespace` " +
			"or, with `delivery.flux`, the pull settings (`secret_ref`, `cert_secret_ref`) has a revision that differs from this one.",
		Parameters: []function.Parameter{
			function.StringParameter{
				Name:                "manifests",
				MarkdownDescription: "Multi-document YAML (documents separated by `---`).",
			},
		},
		Return: function.StringReturn{},
	}
}

func (revision) Run(ctx context.Context, req function.RunRequest, resp *function.RunResponse) {
	var manifests string
	resp.Error = function.ConcatFuncErrors(req.Arguments.Get(ctx, &manifests))
	if resp.Error != nil {
		return
	}
	name, err := manifest.Revision(manifests)
	if err != nil {
		resp.Error = function.NewArgumentFuncError(0, "Invalid manifests: "+err.Error())
		return
	}
	resp.Error = function.ConcatFuncErrors(resp.Result.Set(ctx, name))
}
