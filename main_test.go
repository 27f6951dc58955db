package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestStartProfile: the profile goes to cpu-<pid>.pprof in the directory named, and is written
// (non-empty) once stopped; a directory that does not exist is refused.
func TestStartProfile(t *testing.T) {
	dir := t.TempDir()
	stop, err := startProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	fi, err := os.Stat(filepath.Join(dir, "cpu-"+strconv.Itoa(os.Getpid())+".pprof"))
	if err != nil || fi.Size() == 0 {
		t.Fatalf("profile after stop: %v (size %d), want a non-empty file", err, sizeOf(fi))
	}
	if _, err := startProfile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("startProfile into a missing directory: no error")
	}
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}
