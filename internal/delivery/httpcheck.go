package delivery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// HTTPCheck is an extra health check run after a cluster's objects are ready: GET URL (with
// `{cluster}` replaced by the cluster name) until it answers ExpectedStatus.
type HTTPCheck struct {
	URL            string
	ExpectedStatus int
	Timeout        time.Duration
}

// maxCheckAttempts bounds retries of one check; the verify timeout bounds them too.
const maxCheckAttempts = 10

// runHTTPChecks runs every check for cluster until each passes, retrying with capped backoff
// within ctx (which carries the verify timeout).
func runHTTPChecks(ctx context.Context, cluster string, checks []HTTPCheck, logger retryablehttp.LeveledLogger) error {
	for _, check := range checks {
		if err := runHTTPCheck(ctx, cluster, check, logger); err != nil {
			return err
		}
	}
	return nil
}

func runHTTPCheck(ctx context.Context, cluster string, check HTTPCheck, logger retryablehttp.LeveledLogger) error {
	url := strings.ReplaceAll(check.URL, "{cluster}", cluster)
	client := retryablehttp.NewClient()
	client.RetryMax = maxCheckAttempts - 1
	client.RetryWaitMin = 500 * time.Millisecond
	client.RetryWaitMax = 5 * time.Second
	client.HTTPClient.Timeout = check.Timeout
	// Redirects are not followed: a check answers for the URL it names.
	client.HTTPClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	client.Logger = logger
	want := check.ExpectedStatus
	client.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil {
			return true, nil
		}
		return resp.StatusCode != want, nil
	}
	// Keep the last answer instead of retryablehttp's "giving up" error, so the reason is shown.
	client.ErrorHandler = func(resp *http.Response, err error, attempts int) (*http.Response, error) {
		if resp != nil {
			return resp, nil
		}
		return nil, fmt.Errorf("after %d attempts: %w", attempts, err)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("http check %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("http check %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != want {
		return fmt.Errorf("http check %s: got status %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}
