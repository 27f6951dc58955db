package main

import (
	"context"
	"math"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	busy, total, err := parseProcStat("cpu  100 5 50 800 45 0 0 0 0 0\ncpu0 1 2 3 4 5\n")
	if err != nil || busy != 155 || total != 1000 {
		t.Fatalf("parseProcStat = %d, %d, %v; want 155, 1000", busy, total, err)
	}
	if _, _, err := parseProcStat("intr 1 2 3\n"); err == nil {
		t.Fatal("a file without the cpu line parsed")
	}
}

// TestSettleWaitsForAQuietWindow: two busy windows, then a quiet one; settle returns after the
// quiet one with its busy fraction.
func TestSettleWaitsForAQuietWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits three 2-second windows")
	}
	// Readings in pairs (start, end of a window): 90% busy, 80%, then 20%.
	readings := [][2]uint64{{0, 0}, {900, 1000}, {900, 1000}, {1700, 2000}, {1700, 2000}, {1900, 3000}}
	i := 0
	got, err := settle(context.Background(), func() (uint64, uint64, error) {
		r := readings[i]
		i++
		return r[0], r[1], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if i != 6 || math.Abs(got.busy-0.2) > 1e-9 {
		t.Errorf("settle read %d times and returned busy %.2f; want 6 reads and 0.20", i, got.busy)
	}
}
