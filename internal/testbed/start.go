package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// KeepEnv names the variable that, set to 1, keeps the fleet of a failed test running for a
// look (tear it down with `gradual-testbed down --dir DIR`).
const KeepEnv = "GRADUAL_TESTBED_KEEP"

// TestRoot is where Start puts test fleets: one directory per fleet, each holding a lock that its
// test process keeps for its lifetime, so fleets of killed test processes can be found and reaped.
func TestRoot() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("gradual-testbed-%d", os.Getuid()))
}

// Start brings up a fleet for a test and tears it down when the test ends, failed or not. A
// missing toolchain fails the test (it does not skip): callers decide about skipping. Fleets
// left behind by test processes that were killed (timeout panic, Ctrl-C) are reaped first.
func Start(t testing.TB, opts Options) *Fleet {
	t.Helper()
	tc, err := ToolchainFromEnv()
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	prefix := dirSafe.ReplaceAllString(t.Name(), "_")
	t0 := clock.System{}.Now()
	f, err := UpEphemeral(t.Context(), tc, prefix[:min(len(prefix), 40)], opts)
	if err != nil {
		t.Fatalf("test bed: %v", err)
	}
	t.Logf("test bed: fleet %s up in %s (management kubeconfig %s)", f.Name, time.Since(t0).Round(100*time.Millisecond), f.Management.KubeconfigPath)
	t.Cleanup(func() {
		if t.Failed() && os.Getenv(KeepEnv) == "1" {
			f.Keep()
			t.Logf("test bed: %s=1, keeping fleet %s; tear it down with: gradual-testbed down --dir %s", KeepEnv, f.Name, f.Dir)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := f.Down(ctx); err != nil {
			t.Errorf("test bed: tear down: %v", err)
		}
	})
	return f
}

// UpEphemeral is Up for a test process that manages the fleet's lifetime itself (TestMain, a
// fleet shared by a package's tests): the fleet goes to a new directory under TestRoot, locked
// for as long as this process lives, after reaping the fleets of dead test processes. The caller
// calls Down; if the process dies first, the next UpEphemeral or Start reaps the fleet. When
// opts.Dir is set it is used as is, without lock or reaping.
func UpEphemeral(ctx context.Context, tc Toolchain, name string, opts Options) (*Fleet, error) {
	if opts.Dir != "" {
		return Up(ctx, tc, opts)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	root := TestRoot()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	Reap(ctx, root, logf)
	dir, err := os.MkdirTemp(root, dirSafe.ReplaceAllString(name, "_")+"-")
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(dir, true)
	if err != nil {
		return nil, err
	}
	opts.Dir, opts.ephemeral = dir, true
	f, err := Up(ctx, tc, opts)
	if err != nil {
		_ = lock.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	f.lock = lock
	return f, nil
}

// Keep turns an ephemeral fleet into one that outlives its test process (nothing reaps it);
// `gradual-testbed down --dir DIR` tears it down.
func (f *Fleet) Keep() {
	_ = f.update(func() { f.Ephemeral = false })
}

var dirSafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// lockDir takes the exclusive lock on dir/fleet.lock; with wait false it fails at once when the
// lock is held. The kernel releases it when the holder dies, however it dies.
func lockDir(dir string, wait bool) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "fleet.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// Reap tears down the ephemeral fleets under root whose test process is gone (their lock is free).
// Fleets of live processes, and fleets made by `gradual-testbed up`, are left alone.
func Reap(ctx context.Context, root string, logf func(string, ...any)) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		lock, err := lockDir(dir, false)
		if err != nil {
			continue // held: its test is running (or the directory is not ours)
		}
		func() {
			defer lock.Close()
			f, err := Load(dir)
			if err != nil {
				// A directory whose Up never saved state: remove it once it is clearly abandoned.
				if info, serr := os.Stat(dir); serr == nil && time.Since(info.ModTime()) > 10*time.Minute && errors.Is(err, os.ErrNotExist) {
					_ = os.RemoveAll(dir)
				}
				return
			}
			if !f.Ephemeral {
				return
			}
			logf("test bed: reaping fleet %s left by a test process that is gone (%s)", f.Name, dir)
			f.SetLogf(logf)
			if err := f.Down(ctx); err != nil {
				logf("test bed: reap %s: %v", dir, err)
			}
		}()
	}
}
