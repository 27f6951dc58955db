package delivery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
)

// The check Job (verify.check_job): a batch/v1 Job the rollout runs in each cluster once the new
// revision's objects are ready, at each verification (after the apply, after the bake). A Job
// that completes passes; one that fails (its Failed condition) or does not finish in time is a
// failure of the revision, named with the condition's reason and message. A Job that cannot be
// created or read is the cluster's failure (infrastructure: retried, never blamed on the
// revision). The Job is deleted afterwards whatever the outcome, its pods with it; what it said
// stays in the failure. One of a run that was interrupted is deleted before the next is created.
//
// Through Flux nothing connects to the workload clusters: the Job goes into the revision's
// artifact instead (ForFlux), named for the revision, and kustomize-controller waits on it with
// the revision's other objects (spec.wait: kstatus says a Job is Current once Complete, Failed
// once Failed), so that a failed Job is the Kustomization's HealthCheckFailed: the revision's
// failure (internal/blame), as when delivering directly.

// CheckJob is a rollout's or a module assignment's verify.check_job.
type CheckJob struct {
	// Job is the batch/v1 Job, name and namespace set (ParseCheckJob); with values, a template.
	Job *unstructured.Unstructured
	// Timeout bounds the wait for it to finish; verify.timeout bounds it too.
	Timeout time.Duration
	// Rendered holds, with values, the Job rendered for each cluster with the manifests'
	// variables (Render): a cluster it lacks runs an error, never the template.
	Rendered map[string]*unstructured.Unstructured
	// Only, when not nil, are the clusters the Job runs on; it is skipped on the others (an
	// assignment runs it once per cluster, after the last of the modules it delivers there).
	Only map[string]bool
}

// Render renders the Job for each eligible cluster of clusters with that cluster's variables
// (Values.Render, as the manifests are), keeping the results in Rendered; it returns, by
// cluster, why a cluster's Job cannot be rendered (the variables it misses).
func (j *CheckJob) Render(v *Values, clusters []fleet.Cluster, redactValues []string) map[string]string {
	rendered, problems := v.Render(&manifest.Set{Objects: []*unstructured.Unstructured{j.Job}}, clusters, redactValues)
	j.Rendered = make(map[string]*unstructured.Unstructured, len(rendered))
	for name, set := range rendered {
		j.Rendered[name] = set.Objects[0]
	}
	return problems
}

// For is the Job cluster runs: nil when it runs none (Only), its rendering with values.
func (j *CheckJob) For(cluster string, values bool) (*unstructured.Unstructured, error) {
	if j == nil || (j.Only != nil && !j.Only[cluster]) {
		return nil, nil
	}
	if !values {
		return j.Job, nil
	}
	if job, ok := j.Rendered[cluster]; ok {
		return job, nil
	}
	return nil, fmt.Errorf("the check Job was not rendered for cluster %s (it was not eligible when the fleet was read); the next plan renders it", cluster)
}

// fluxJobSuffix is how much of the revision a check Job's name carries through Flux.
const fluxJobSuffix = 8

// ForFlux is the Job that goes into the artifact of revision for cluster through Flux (nil when
// the cluster runs none): For's, named <name>-<the revision's first 8 characters>. A Job's pod
// template is immutable, and a Job that did not change would not run again: a name per revision
// makes each revision's Job a new object, which kustomize-controller creates and waits for, and
// the previous revision's Job a removed one, which it prunes (its pods with it). Re-creating one
// Job under the same name with the `kustomize.toolkit.fluxcd.io/force` annotation would need the
// template changed at every revision as well, and would recreate it at every reconcile that
// finds a field changed. The name is cut to leave 63 characters (the Job's name is a label value
// of its pods). ttlSecondsAfterFinished is dropped: Flux would create a Job the TTL removed again
// at its next reconcile, running it again; the Job stays until the next revision prunes it.
func (j *CheckJob) ForFlux(cluster, revision string, values bool) (*unstructured.Unstructured, error) {
	job, err := j.For(cluster, values)
	if err != nil || job == nil {
		return job, err
	}
	job = job.DeepCopy()
	suffix := "-" + revision[:min(fluxJobSuffix, len(revision))]
	name := job.GetName()
	if len(name)+len(suffix) > 63 {
		name = strings.TrimRight(name[:63-len(suffix)], "-.")
	}
	job.SetName(name + suffix)
	unstructured.RemoveNestedField(job.Object, "spec", "ttlSecondsAfterFinished")
	// timeout as the Job's own deadline, unless it has one: a Job still running then fails
	// (DeadlineExceeded), the revision's failure as delivering directly, rather than
	// kustomize-controller's wait running out, which says less.
	if _, ok, _ := unstructured.NestedFieldNoCopy(job.Object, "spec", "activeDeadlineSeconds"); !ok && j.Timeout > 0 {
		_ = unstructured.SetNestedField(job.Object, int64(j.Timeout/time.Second), "spec", "activeDeadlineSeconds")
	}
	return job, nil
}

// FluxRevision is the revision, through Flux, of content named revision when j (nil: none) is
// its check Job: the Job is part of the artifact (ForFlux), so a change of the Job or its
// timeout alone is another revision, rolled out in waves, and a revision's tag never holds
// other content than the plan computed.
func (j *CheckJob) FluxRevision(revision string) (string, error) {
	if j == nil {
		return revision, nil
	}
	canonical, err := (&manifest.Set{Objects: []*unstructured.Unstructured{j.Job}}).Canonical()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00check_job\x00%s\x00", revision, j.Timeout)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))[:manifest.RevisionLength], nil
}

// ParseCheckJob reads a check Job's manifest: one batch/v1 Job with metadata.name and
// metadata.namespace (it runs beside the objects it checks, in a namespace of theirs).
func ParseCheckJob(text string) (*unstructured.Unstructured, error) {
	set, err := manifest.Parse(text)
	if err != nil {
		return nil, err
	}
	if len(set.Objects) != 1 {
		return nil, fmt.Errorf("want exactly one object, a batch/v1 Job; found %d", len(set.Objects))
	}
	obj := set.Objects[0]
	if obj.GetAPIVersion() != "batch/v1" || obj.GetKind() != "Job" {
		return nil, fmt.Errorf("want a batch/v1 Job, found %s %s", obj.GetAPIVersion(), obj.GetKind())
	}
	if obj.GetNamespace() == "" {
		return nil, fmt.Errorf("Job %s has no metadata.namespace", obj.GetName())
	}
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &job, true); err != nil {
		return nil, fmt.Errorf("Job %s is not a valid batch/v1 Job: %w", obj.GetName(), err)
	}
	return obj, nil
}

// checkJobPoll is how often a running check Job is read.
var checkJobPoll = time.Second

// checkJobCleanupTimeout bounds the deletion of the Job once it is done with.
const checkJobCleanupTimeout = 10 * time.Second

// runCheckJob runs job.Job (the cluster's, see For) on cluster through c and waits for it to
// finish; logf says what the cleanup could not do.
func runCheckJob(ctx context.Context, c client.Client, cluster string, job *CheckJob, logf func(string)) error {
	key := client.ObjectKeyFromObject(job.Job)
	name := "check Job " + key.String()
	// A Job of an interrupted run (or of the last verification, if its deletion failed) would be
	// read as this one's result: it goes first, and is gone before the new one is created.
	if err := deleteJob(ctx, c, key); err != nil {
		return fmt.Errorf("%s: delete the previous run: %v", name, err) // %v: the cluster's failure, never the revision's
	}
	if err := wait.PollUntilContextCancel(ctx, checkJobPoll, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		return fmt.Errorf("%s: the previous run is not gone: %v", name, err)
	}
	if err := c.Create(ctx, job.Job.DeepCopy()); err != nil {
		return fmt.Errorf("%s: create: %v", name, err)
	}
	defer func() {
		// Outlives cancellation: the Job is deleted even when the check was cut short.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkJobCleanupTimeout)
		defer cancel()
		if err := deleteJob(cctx, c, key); err != nil {
			logf(fmt.Sprintf("%s: %s: not deleted (the next run deletes it): %v", cluster, name, err))
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, job.Timeout)
	defer cancel()
	var last batchv1.Job
	err := wait.PollUntilContextCancel(wctx, checkJobPoll, false, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, &last); err != nil {
			return false, err
		}
		return finished(&last), nil
	})
	switch {
	case err == nil:
		if cond := jobCondition(&last, batchv1.JobFailed); cond != nil {
			return engine.Mark(engine.ErrRevisionFailed, fmt.Errorf("%s failed: %s", name, describeCondition(cond)))
		}
		return nil
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ctx.Err() // interrupted: no verdict
	case wctx.Err() != nil:
		return engine.Mark(engine.ErrRevisionFailed, fmt.Errorf("%s did not finish within %s (%d active, %d succeeded, %d failed)",
			name, boundOf(ctx, job.Timeout), last.Status.Active, last.Status.Succeeded, last.Status.Failed))
	}
	return fmt.Errorf("%s: read: %v", name, err)
}

// finished reports whether the Job has its Complete or Failed condition.
func finished(job *batchv1.Job) bool {
	return jobCondition(job, batchv1.JobComplete) != nil || jobCondition(job, batchv1.JobFailed) != nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func describeCondition(c *batchv1.JobCondition) string {
	out := string(c.Type)
	if c.Reason != "" {
		out += " (" + c.Reason + ")"
	}
	if c.Message != "" {
		out += ": " + c.Message
	}
	return out
}

// boundOf is the wait that ended: timeout, or what was left of verify.timeout when it was shorter.
func boundOf(ctx context.Context, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "verify.timeout"
	}
	return timeout.String()
}

// deleteJob deletes the Job and, in the background, its pods; a Job that is not there is fine.
func deleteJob(ctx context.Context, c client.Client, key client.ObjectKey) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
