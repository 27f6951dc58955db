package records

import "testing"

// skipUnderRace skips a test that pushes megabytes through compression and JSON, or thousands
// of writes, from one goroutine: it has nothing for the race detector to find, and under -race
// it runs twenty times slower (about a minute each on 2 cores), so `make unit` runs it
// without (the GNUmakefile's UNIT_WITHOUT_RACE names each test that calls this).
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceDetector {
		t.Skip("one goroutine, megabytes of data: `make unit` runs it without -race")
	}
}
