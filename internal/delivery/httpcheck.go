package delivery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/gradual-dev/terraform-provider-gradual/internal/blame"
)

// HTTPCheck is an extra health check run after a cluster's objects are ready: GET URL (with
// `{cluster}` replaced by the cluster name) until it answers ExpectedStatus. A check that ends
// unanswered, or answered by a gateway (502, 503, 504, 429), is an infrastructure failure
// (blame.HTTPAnswerError) and Verify tries it again until the verify timeout; any other wrong
// status is the revision's failure.
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
	last := "no answer" // the last attempt's outcome, for the error when time runs out
	status := 0         // the last status answered (blame.HTTPAnswerError: a gateway's is not the app's)
	client.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		switch {
		case err != nil:
			last = err.Error()
		case resp.StatusCode != want:
			last = fmt.Sprintf("got status %d, want %d", resp.StatusCode, want)
			status = resp.StatusCode
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		// A connection error or another status is worth another try within the timeout; the
		// ErrorHandler below reports the last one.
		return err != nil || resp.StatusCode != want, nil //nolint:nilerr // a failed attempt is retried, not returned
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
		return &blame.HTTPAnswerError{Status: status, Want: want, Err: fmt.Errorf("http check %s: %s: %w", url, last, err)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != want {
		return &blame.HTTPAnswerError{Status: resp.StatusCode, Want: want, Err: fmt.Errorf("http check %s: got status %d, want %d", url, resp.StatusCode, want)}
	}
	return nil
}

// checkLogger forwards go-retryablehttp's messages to the run's log (tflog in the provider), so
// retries of a check show in TF_LOG_PROVIDER output.
type checkLogger struct {
	logf func(string, map[string]any)
}

func (l checkLogger) log(level, msg string, kv []any) {
	fields := map[string]any{"level": level}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[fmt.Sprint(kv[i])] = kv[i+1]
	}
	l.logf("http check: "+msg, fields)
}

func (l checkLogger) Error(msg string, kv ...any) { l.log("error", msg, kv) }
func (l checkLogger) Info(msg string, kv ...any)  { l.log("info", msg, kv) }
func (l checkLogger) Debug(msg string, kv ...any) { l.log("debug", msg, kv) }
func (l checkLogger) Warn(msg string, kv ...any)  { l.log("warn", msg, kv) }
