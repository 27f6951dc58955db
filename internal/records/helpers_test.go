package records

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// fakeClock is the project's fake clock, with waits for the goroutines sleeping on it.
type fakeClock struct{ *clock.Fake }

func newFakeClock() *fakeClock {
	return &fakeClock{clock.NewFake(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))}
}

// waitSleepers waits (on the wall clock, 10 s at most) until n goroutines sleep on c.
func (c *fakeClock) waitSleepers(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.Pending()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines sleep on the fake clock after 10 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// step advances c by d in steps of at most every, waiting before each step until n
// goroutines sleep on it: a sleeper that wakes and sleeps again sees every step.
func (c *fakeClock) step(t testing.TB, n int, d, every time.Duration) {
	t.Helper()
	for d > 0 {
		c.waitSleepers(t, n)
		s := min(d, every)
		c.Advance(s)
		d -= s
	}
}

// tickingClock is a fake clock that moves a millisecond on every reading, so records written
// one after another have distinct, ordered times.
type tickingClock struct{ fakeClock }

func (c *tickingClock) Now() time.Time {
	c.Advance(time.Millisecond)
	return c.Fake.Now()
}

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func newFakeClient(funcs *interceptor.Funcs) client.WithWatch {
	b := fake.NewClientBuilder().WithScheme(testScheme())
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

// failAfter injects an error into the (n+1)th mutating call (create, update, patch, delete),
// simulating a process that dies there; n < 0 never fails. After every successful mutation it
// calls check.
type failAfter struct {
	mu     sync.Mutex
	n      int
	writes int
	check  func(ctx context.Context, c client.WithWatch)
}

var errInjected = errors.New("injected failure")

func (f *failAfter) funcs() *interceptor.Funcs {
	mutate := func(ctx context.Context, c client.WithWatch, do func() error) error {
		f.mu.Lock()
		f.writes++
		fail := f.n >= 0 && f.writes > f.n
		f.mu.Unlock()
		if fail {
			return errInjected
		}
		if err := do(); err != nil {
			return err
		}
		if f.check != nil {
			f.check(ctx, c)
		}
		return nil
	}
	return &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return mutate(ctx, c, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return mutate(ctx, c, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return mutate(ctx, c, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return mutate(ctx, c, func() error { return c.Delete(ctx, obj, opts...) })
		},
	}
}

// currentCount counts the Secrets labelled current per rollout hash.
func currentCount(ctx context.Context, c client.Reader, namespace string) (map[string]int, error) {
	list := &corev1.SecretList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{LabelState: string(StateCurrent)}); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range list.Items {
		out[s.Labels[LabelRollout]]++
	}
	return out, nil
}

// describe renders a State compactly for comparisons: "current=a backup=b prov=c invalid=[d:reason] superseded=[]".
func describe(st *State) string {
	name := func(r *Revision) string {
		if r == nil {
			return "-"
		}
		if r.Reason != "" {
			return r.Revision + "!" + r.Reason // marked invalid, not yet undone
		}
		return r.Revision
	}
	var inv, sup []string
	for _, r := range st.Invalid {
		inv = append(inv, r.Revision+":"+r.Reason)
	}
	for _, r := range st.Superseded {
		sup = append(sup, name(&r))
	}
	return fmt.Sprintf("current=%s backup=%s prov=%s invalid=%v superseded=%v", name(st.Current), name(st.Backup), name(st.Provisioning), inv, sup)
}
