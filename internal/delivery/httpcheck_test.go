package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHTTPCheckRetriesUntilHealthy(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/prod-eu-1") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	err := runHTTPChecks(context.Background(), "prod-eu-1", []HTTPCheck{{URL: srv.URL + "/health/{cluster}", ExpectedStatus: 200, Timeout: time.Second}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 {
		t.Fatalf("calls = %d, want 3", calls.Load())
	}
}

func TestHTTPCheckFailsWithinTimeoutAndSaysWhy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := runHTTPChecks(ctx, "c", []HTTPCheck{{URL: srv.URL + "/x", ExpectedStatus: 200, Timeout: time.Second}}, nil)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
	// A redirect is not followed: its status is what the check sees.
	err = runHTTPChecks(context.Background(), "c", []HTTPCheck{{URL: srv.URL + "/redirect", ExpectedStatus: 302, Timeout: time.Second}}, nil)
	if err != nil {
		t.Fatalf("redirect status not seen: %v", err)
	}
}
