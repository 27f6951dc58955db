package testbed

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFreePortsAreDistinctOutsideTheEphemeralRangeAndNotHandedOutTwice(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // a ledger of this test's own
	first, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	second, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range append(first, second...) {
		if p < portLow || p >= portHigh {
			t.Errorf("port %d outside %d-%d", p, portLow, portHigh-1)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice: %v then %v", p, first, second)
		}
		seen[p] = true
	}
	recent := readPortLedger(portLedger(), time.Now())
	for p := range seen {
		if _, ok := recent[p]; !ok {
			t.Errorf("port %d not in the ledger %v", p, recent)
		}
	}
}

func TestFreePortsSkipsABoundPort(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	// Quarantine every port of the range but two, and hold one of those two: only the other
	// can be handed out.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := l.Addr().(*net.TCPAddr).Port
	if held < portLow || held >= portHigh {
		// The kernel picked an ephemeral port: bind one in the range instead.
		_ = l.Close()
		for p := portLow; p < portHigh; p++ {
			if l, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
				held = p
				break
			}
		}
		if err != nil {
			t.Skip("no port of the range could be bound")
		}
		defer l.Close()
	}
	free := -1
	now := time.Now()
	recent := map[int]time.Time{}
	for p := portLow; p < portHigh; p++ {
		if p == held {
			continue
		}
		if free < 0 && canBind(p) {
			free = p
			continue
		}
		recent[p] = now
	}
	if err := writePortLedger(portLedger(), recent); err != nil {
		t.Fatal(err)
	}
	got, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != free {
		t.Errorf("freePorts(1) = %v, want [%d] (%d is bound, the rest quarantined)", got, free, held)
	}
	if _, err := freePorts(1); err == nil {
		t.Error("freePorts(1) with no port left succeeded, want an error")
	}
}

func TestReadPortLedgerForgetsOldEntriesAndGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	now := time.Now()
	text := "10001 " + strconv.FormatInt(now.Unix(), 10) + "\n" +
		"10002 " + strconv.FormatInt(now.Add(-2*portQuarantine).Unix(), 10) + "\n" +
		"garbage\n10003 x\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := readPortLedger(path, now)
	if len(got) != 1 {
		t.Fatalf("readPortLedger = %v, want only 10001", got)
	}
	if _, ok := got[10001]; !ok {
		t.Fatalf("readPortLedger = %v, want 10001", got)
	}
}

func TestExitedNamesTheComponentThatIsGoneWithItsLog(t *testing.T) {
	k := &kwokctl{workdir: t.TempDir()}
	dir := k.clusterDir("c")
	for _, d := range []string{"pids", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	live := exec.Command("sleep", "60")
	live.Dir = dir
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	dead := exec.Command("true")
	dead.Dir = dir
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pids/kube-apiserver.pid", strconv.Itoa(live.Process.Pid))
	if err := k.exited("c"); err != nil {
		t.Fatalf("exited with every component running = %v, want nil", err)
	}
	write("pids/kwok-controller.pid", strconv.Itoa(dead.Process.Pid))
	write("logs/kwok-controller.log", "starting\nlisten tcp 127.0.0.1:12345: bind: address already in use\n")
	err := k.exited("c")
	if err == nil || !strings.Contains(err.Error(), "kwok-controller exited") || !strings.Contains(err.Error(), "address already in use") || strings.Contains(err.Error(), "kube-apiserver") {
		t.Fatalf("exited = %v, want kwok-controller named with its log, and only it", err)
	}
}
