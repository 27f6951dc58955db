package delivery

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/engine"
	"github.com/gradual-dev/terraform-provider-gradual/internal/fleet"
	"github.com/gradual-dev/terraform-provider-gradual/internal/manifest"
	"github.com/gradual-dev/terraform-provider-gradual/internal/records"
)

const checkJobManifest = `apiVersion: batch/v1
kind: Job
metadata: {name: smoke, namespace: demo}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: smoke, image: registry.example/smoke:1}]
`

func testCheckJob(t *testing.T, timeout time.Duration) *CheckJob {
	t.Helper()
	job, err := ParseCheckJob(checkJobManifest)
	if err != nil {
		t.Fatal(err)
	}
	return &CheckJob{Job: job, Timeout: timeout}
}

// jobCluster is a fake workload cluster whose Job controller, on the read that follows the
// create, gives the Job the condition finish returns (none: it runs on); faults replaces a call.
type jobCluster struct {
	client  client.Client
	raw     client.Client // without the faults: what is really there
	created atomic.Int32
}

func newJobCluster(t *testing.T, finish func() *batchv1.JobCondition, faults interceptor.Funcs, objs ...client.Object) *jobCluster {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	jc := &jobCluster{}
	funcs := interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if faults.Create != nil {
				return faults.Create(ctx, c, obj, opts...)
			}
			jc.created.Add(1)
			return c.Create(ctx, obj, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if faults.Get != nil && jc.created.Load() > 0 {
				return faults.Get(ctx, c, key, obj, opts...)
			}
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if job, ok := obj.(*batchv1.Job); ok && finish != nil {
				if cond := finish(); cond != nil {
					job.Status.Conditions = append(job.Status.Conditions, *cond)
				} else {
					job.Status.Active = 1
				}
			}
			return nil
		},
	}
	raw := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	jc.raw, jc.client = raw, interceptor.NewClient(raw, funcs)
	return jc
}

func (jc *jobCluster) jobExists(t *testing.T) bool {
	t.Helper()
	err := jc.raw.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "smoke"}, &batchv1.Job{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func fastCheckJobPoll(t *testing.T) {
	t.Helper()
	saved := checkJobPoll
	checkJobPoll = 5 * time.Millisecond
	t.Cleanup(func() { checkJobPoll = saved })
}

func condition(t batchv1.JobConditionType, reason, message string) func() *batchv1.JobCondition {
	return func() *batchv1.JobCondition {
		return &batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message}
	}
}

func TestCheckJobCompletes(t *testing.T) {
	fastCheckJobPoll(t)
	// A Job of an interrupted run is there: it is replaced, not read as this run's result.
	leftover := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "smoke"}}
	jc := newJobCluster(t, condition(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods"), interceptor.Funcs{}, leftover)
	if err := runCheckJob(context.Background(), jc.client, "c1", testCheckJob(t, time.Minute), func(s string) { t.Log(s) }); err != nil {
		t.Fatal(err)
	}
	if jc.created.Load() != 1 || jc.jobExists(t) {
		t.Errorf("created %d times, still there: %v; want created once and deleted", jc.created.Load(), jc.jobExists(t))
	}
}

func TestCheckJobFailedIsTheRevisions(t *testing.T) {
	fastCheckJobPoll(t)
	jc := newJobCluster(t, condition(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit"), interceptor.Funcs{})
	err := runCheckJob(context.Background(), jc.client, "c1", testCheckJob(t, time.Minute), func(s string) { t.Log(s) })
	if !errors.Is(err, engine.ErrRevisionFailed) {
		t.Fatalf("err = %v, want a revision failure", err)
	}
	for _, want := range []string{"check Job demo/smoke failed", "Failed (BackoffLimitExceeded)", "backoff limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if jc.jobExists(t) {
		t.Error("the failed Job is still there")
	}
}

func TestCheckJobNeverFinishes(t *testing.T) {
	fastCheckJobPoll(t)
	jc := newJobCluster(t, func() *batchv1.JobCondition { return nil }, interceptor.Funcs{})
	start := time.Now()
	err := runCheckJob(context.Background(), jc.client, "c1", testCheckJob(t, 50*time.Millisecond), func(s string) { t.Log(s) })
	if !errors.Is(err, engine.ErrRevisionFailed) || !strings.Contains(err.Error(), "did not finish within 50ms (1 active") {
		t.Fatalf("err = %v, want a revision failure: did not finish within 50ms", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s: the timeout does not bound the wait", time.Since(start))
	}
	if jc.jobExists(t) {
		t.Error("the unfinished Job is still there")
	}

	// verify.timeout, shorter, bounds it too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = runCheckJob(ctx, jc.client, "c1", testCheckJob(t, time.Hour), func(s string) { t.Log(s) })
	if !errors.Is(err, engine.ErrRevisionFailed) || !strings.Contains(err.Error(), "did not finish within verify.timeout") {
		t.Fatalf("err = %v, want a revision failure at verify.timeout", err)
	}
}

// A Job the cluster refuses to create or cannot read is the cluster's failure, however the
// refusal is worded: never a verdict on the revision.
func TestCheckJobCreateRefused(t *testing.T) {
	fastCheckJobPoll(t)
	for name, refusal := range map[string]error{
		"forbidden":    apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "smoke", errors.New("RBAC: no create")),
		"invalid":      apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "smoke", nil),
		"no namespace": apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "demo"),
	} {
		t.Run(name, func(t *testing.T) {
			jc := newJobCluster(t, nil, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return refusal
			}})
			err := runCheckJob(context.Background(), jc.client, "c1", testCheckJob(t, time.Minute), func(s string) { t.Log(s) })
			if err == nil || errors.Is(err, engine.ErrRevisionFailed) || revisionClass(err) != nil || !strings.Contains(err.Error(), "check Job demo/smoke: create") {
				t.Fatalf("err = %v (class %v), want an infrastructure failure naming the Job", err, revisionClass(err))
			}
		})
	}
}

func TestCheckJobReadFails(t *testing.T) {
	fastCheckJobPoll(t)
	jc := newJobCluster(t, nil, interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return apierrors.NewServiceUnavailable("etcd is down")
	}})
	err := runCheckJob(context.Background(), jc.client, "c1", testCheckJob(t, time.Minute), func(s string) { t.Log(s) })
	if err == nil || errors.Is(err, engine.ErrRevisionFailed) || revisionClass(err) != nil || !strings.Contains(err.Error(), "check Job demo/smoke: read") {
		t.Fatalf("err = %v, want an infrastructure failure naming the Job", err)
	}
	if jc.created.Load() != 1 || jc.jobExists(t) {
		t.Errorf("created %d, still there %v: want the Job created once, then deleted", jc.created.Load(), jc.jobExists(t))
	}
}

func TestParseCheckJob(t *testing.T) {
	for text, want := range map[string]string{
		checkJobManifest: "",
		"apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: a, namespace: b}\n":                         "want a batch/v1 Job, found batch/v1 CronJob",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\n":                                           "Job a has no metadata.namespace",
		checkJobManifest + "---\n" + checkJobManifest:                                                      "already defined",
		checkJobManifest + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: demo}\n":  "want exactly one object",
		"apiVersion: batch/v1\nkind: Job\nmetadata: {name: a, namespace: b}\nspec: {backoffLimit: many}\n": "not a valid batch/v1 Job",
		"": "found 0",
	} {
		_, err := ParseCheckJob(text)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", text, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: err = %v, want %q", text, err, want)
		}
	}
}

// With values the check Job is a template like the manifests (Spec.Render): each cluster runs
// its own rendering; a variable a cluster lacks refuses the whole render naming the cluster and
// the variable; Only limits the clusters it runs on.
func TestCheckJobRendered(t *testing.T) {
	job, err := ParseCheckJob(strings.Replace(checkJobManifest, "namespace: demo", "namespace: \"demo-${zone}\"", 1))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Key: records.Key{Kind: "rollout", Namespace: "fleet", Name: "web"}, Objects: &manifest.Set{},
		Values: &Values{FromLabels: map[string]string{"zone": "example.com/zone"}}, CheckJob: &CheckJob{Job: job, Timeout: time.Minute}}
	given := spec.CheckJob
	clusters := []fleet.Cluster{{Name: "c1", Namespace: "fleet", Labels: map[string]string{"example.com/zone": "eu"}}, {Name: "c2", Namespace: "fleet"}}
	err = spec.Render(clusters)
	if err == nil || !strings.Contains(err.Error(), "c2: verify.check_job: variable zone not set") || strings.Contains(err.Error(), "c1:") {
		t.Fatalf("render: %v, want c2 refused for zone in verify.check_job, c1 not named", err)
	}
	if err := spec.Render(clusters[:1]); err != nil {
		t.Fatal(err)
	}
	if got, err := spec.CheckJob.For("c1", true); err != nil || got.GetNamespace() != "demo-eu" {
		t.Fatalf("c1 runs %v (%v), want its rendering in demo-eu", got, err)
	}
	if _, err := spec.CheckJob.For("c2", true); err == nil {
		t.Error("c2, not rendered, runs the template")
	}
	if given.Rendered != nil {
		t.Error("Render changed the caller's check Job")
	}
	if got, _ := given.For("c2", false); got != job {
		t.Error("without values a cluster does not run the Job as given")
	}
	only := &CheckJob{Job: job, Only: map[string]bool{"c1": true}}
	if got, err := only.For("c2", false); got != nil || err != nil {
		t.Errorf("Only c1: c2 runs %v (%v)", got, err)
	}
}
