package settings

import (
	"testing"
	"time"
)

func TestWithDefaults(t *testing.T) {
	got := Settings{}.WithDefaults()
	if got.LeaseDuration != DefaultLeaseDuration || got.Parallelism != DefaultParallelism || got.RequestTimeout != DefaultRequestTimeout || got.Window != nil {
		t.Errorf("zero settings: %+v", got)
	}
	set := Settings{LeaseDuration: 90 * time.Second, Parallelism: 3, RequestTimeout: time.Minute}
	if got := set.WithDefaults(); got != set {
		t.Errorf("set settings changed: %+v, want %+v", got, set)
	}
}
