package testbed

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

// The ports the test bed hands its components (API servers, etcd, controllers) come from
// portLow..portHigh-1. Not from the kernel's ephemeral range (32768-60999 by default): every
// outgoing connection on the machine draws its local port from there, and a port picked there and
// freed for a component to bind was, under load, taken by a client connection in between; the
// component then exits and its cluster never comes up. The range also stays clear of what
// CAPD's in-memory provider binds (19000 and 20000-30000).
const (
	portLow  = 10000
	portHigh = 19000
	// portQuarantine is how long a handed-out port is not handed out again, by any process:
	// long enough for the component it was picked for to start and bind it.
	portQuarantine = 10 * time.Minute
)

// portLedger is the file, shared by every test-bed process on the machine (test packages run side
// by side, and the CI lanes start beds at once), that records which ports were handed out when.
// Its lock file serializes the picking.
func portLedger() string { return filepath.Join(os.TempDir(), "gradual-testbed-ports") }

// freePorts returns n distinct ports that are free now, that no test-bed process handed out in
// the last portQuarantine, and that are outside the ephemeral range.
func freePorts(n int) ([]int, error) {
	lock, err := os.OpenFile(portLedger()+".lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("find free ports: %w", err)
	}
	defer func() { _ = lock.Close() }() // closing releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("find free ports: lock %s: %w", lock.Name(), err)
	}
	now := clock.System{}.Now()
	recent := readPortLedger(portLedger(), now)
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 20*(portHigh-portLow) {
			return nil, fmt.Errorf("find free ports: no %d free ports in %d-%d", n, portLow, portHigh-1)
		}
		p := portLow + rand.IntN(portHigh-portLow) //nolint:gosec // spreading ports, not a secret
		if _, taken := recent[p]; taken || !canBind(p) {
			continue
		}
		recent[p] = now
		ports = append(ports, p)
	}
	if err := writePortLedger(portLedger(), recent); err != nil {
		return nil, fmt.Errorf("find free ports: %w", err)
	}
	return ports, nil
}

// canBind reports whether nothing listens on port on the loopback address now.
func canBind(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// readPortLedger returns the ports handed out within portQuarantine of now. A missing or garbled
// ledger is an empty one: the bind check still stands.
func readPortLedger(path string, now time.Time) map[int]time.Time {
	recent := map[int]time.Time{}
	f, err := os.Open(path)
	if err != nil {
		return recent
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		port, at, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		p, err1 := strconv.Atoi(port)
		unix, err2 := strconv.ParseInt(at, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if t := time.Unix(unix, 0); now.Sub(t) < portQuarantine {
			recent[p] = t
		}
	}
	return recent
}

func writePortLedger(path string, recent map[int]time.Time) error {
	var b strings.Builder
	for p, t := range recent {
		fmt.Fprintf(&b, "%d %d\n", p, t.Unix())
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o666); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
