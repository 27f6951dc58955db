package fleet

import (
	"fmt"
	"strings"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/usererr"
	"github.com/gradual-dev/terraform-provider-gradual/internal/window"
)

// PausedAnnotation holds a cluster out of every rollout and module assignment, whatever Cluster
// API does with it; its value is the reason, shown in plans ("incident 4711", "migrating").
const PausedAnnotation = "gradual.dev/paused"

// Hold is what, besides the Cluster's own state, keeps a rollout off a cluster at a given time:
// the gradual.dev/paused annotation, the cluster's maintenance window (window.Annotation) and
// the rollout's own (Window), both of which must be open.
type Hold struct {
	// Window is the rollout's maintenance window; nil for none.
	Window *window.Window
	// WindowName names Window in skip reasons ("" = "the rollout's maintenance_window"): the
	// window may be a module assignment's, or the provider's.
	WindowName string
	// Margin is how long a window must stay open for a cluster to be started: a change started
	// just before the window closes would go on after it (the verify timeout plus the bake
	// time, so that a wave started in the window ends in it).
	Margin time.Duration
}

// holdFields are what the annotations of a Cluster say about holds, read once by Discover.
type holdFields struct {
	// PauseReason is the gradual.dev/paused annotation's value when GradualPaused.
	GradualPaused bool
	PauseReason   string
	// Window is the cluster's own maintenance window, from window.Annotation; WindowProblem
	// says why that annotation cannot be used (the cluster is then skipped and plans refused).
	Window        *window.Window
	WindowProblem string
}

func readHolds(annotations map[string]string) holdFields {
	var h holdFields
	if reason, ok := annotations[PausedAnnotation]; ok {
		h.GradualPaused, h.PauseReason = true, strings.TrimSpace(reason)
	}
	if value, ok := annotations[window.Annotation]; ok {
		w, err := window.ParseAnnotation(value)
		if err != nil {
			h.WindowProblem = err.Error()
		} else {
			h.Window = &w
		}
	}
	return h
}

// HoldReason says why h keeps the rollout off c at now; "" when it does not. The reasons are
// the same for every cluster that shares a window, so that plans group them.
func (c Cluster) HoldReason(h Hold, now time.Time) string {
	switch {
	case c.GradualPaused:
		reason := c.PauseReason
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Sprintf("paused by the %s annotation: %s", PausedAnnotation, reason)
	case c.WindowProblem != "":
		return fmt.Sprintf("the %s annotation cannot be used: %s", window.Annotation, c.WindowProblem)
	}
	if c.Window != nil {
		if why := closed(*c.Window, "its maintenance window ("+window.Annotation+")", h.Margin, now); why != "" {
			return why
		}
	}
	if h.Window != nil {
		name := h.WindowName
		if name == "" {
			name = "the rollout's maintenance_window"
		}
		return closed(*h.Window, name, h.Margin, now)
	}
	return ""
}

// closed says why w (named what) does not let a change start at now: it is closed, or closes
// within margin. "" when it is open long enough.
func closed(w window.Window, what string, margin time.Duration, now time.Time) string {
	st := w.At(now)
	if !st.Open {
		return fmt.Sprintf("outside %s %s: opens next %s", what, w, when(st.Next))
	}
	if st.Closes.Sub(now) < margin {
		return fmt.Sprintf("%s %s closes %s, within %s (verify timeout + bake time) of now: opens next %s",
			what, w, when(st.Closes), margin, when(w.At(st.Closes).Next))
	}
	return ""
}

func when(t time.Time) string {
	if t.IsZero() {
		return "never (no start within five years)"
	}
	return "at " + t.Format("2006-01-02 15:04 MST")
}

// WindowProblems is the plan-time error for the picked clusters whose window annotation cannot
// be used, naming each cluster and the annotation; nil when there are none.
func (d *Discovery) WindowProblems() error {
	var lines []string
	for _, c := range d.Clusters {
		if c.WindowProblem != "" {
			lines = append(lines, fmt.Sprintf("  - Cluster %s: %s", c.Key(), c.WindowProblem))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("  … and %d more", len(lines)-20))
	}
	return usererr.New("Invalid Maintenance Window Annotation", fmt.Sprintf(
		"The %s annotation of these picked clusters cannot be used; it is \"<cron>;<duration>[;<time zone>]\", e.g. \"0 2 * * 6;4h;Europe/Berlin\":\n%s\n\nFix or remove the annotation, then plan again.",
		window.Annotation, strings.Join(lines, "\n")))
}
