package window

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gradual-dev/terraform-provider-gradual/internal/clock"
)

func mustNew(t *testing.T, schedule, duration, zone string) Window {
	t.Helper()
	w, err := New(schedule, duration, zone)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestNewRefusesBadInputNamingTheField(t *testing.T) {
	for _, tc := range []struct{ schedule, duration, zone, field, says string }{
		{"0 2 * *", "4h", "UTC", "schedule", "five fields"},
		{"61 2 * * *", "4h", "UTC", "schedule", "five fields"},
		{"", "4h", "UTC", "schedule", "empty"},
		{"CRON_TZ=Europe/Berlin 0 2 * * *", "4h", "UTC", "schedule", "own setting"},
		{"@every 1h", "4h", "UTC", "schedule", "no fixed starts"},
		{"0 2 * * *", "4 hours", "UTC", "duration", "not a duration"},
		{"0 2 * * *", "0s", "UTC", "duration", "more than 0"},
		{"0 2 * * *", "200h", "UTC", "duration", "at most 168h"},
		{"0 2 * * *", "4h", "Europe/Berlinn", "time_zone", "IANA"},
		{"0 2 * * *", "4h", "Local", "time_zone", "machine"},
	} {
		_, err := New(tc.schedule, tc.duration, tc.zone)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(%q, %q, %q) = %v, want an error on %s saying %q", tc.schedule, tc.duration, tc.zone, err, tc.field, tc.says)
		}
	}
}

func TestParseAnnotation(t *testing.T) {
	w, err := ParseAnnotation(" 0 2 * * 6 ; 4h ; Europe/Berlin ")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.String(); got != "0 2 * * 6 for 4h (Europe/Berlin)" {
		t.Errorf("String() = %q", got)
	}
	if w, err = ParseAnnotation("@daily;90m"); err != nil || w.String() != "@daily for 1h30m (UTC)" {
		t.Errorf("ParseAnnotation without a time zone = %v, %v; want UTC", w, err)
	}
	for _, bad := range []string{"0 2 * * 6", "0 2 * * 6;4h;UTC;x", "0 2 * * 6;soon"} {
		if _, err := ParseAnnotation(bad); err == nil {
			t.Errorf("ParseAnnotation(%q) accepted", bad)
		}
	}
}

// The window is judged at the time a fake clock gives: before, inside and after one opening,
// with the next start and the close.
func TestAtOpenClosedNext(t *testing.T) {
	w := mustNew(t, "0 2 * * *", "4h", "UTC")
	fake := clock.NewFake(time.Date(2026, 11, 26, 1, 30, 0, 0, time.UTC))
	st := w.At(fake.Now())
	if st.Open || !st.Next.Equal(time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("at 01:30: %+v, want closed, next 02:00 the same day", st)
	}
	fake.Advance(30 * time.Minute) // 02:00: opens exactly now
	if st = w.At(fake.Now()); !st.Open || !st.Closes.Equal(time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("at 02:00: %+v, want open until 06:00", st)
	}
	fake.Advance(3*time.Hour + 59*time.Minute) // 05:59
	if st = w.At(fake.Now()); !st.Open {
		t.Fatalf("at 05:59: %+v, want open", st)
	}
	fake.Advance(time.Minute) // 06:00: closed, the end is not inside
	if st = w.At(fake.Now()); st.Open || !st.Next.Equal(time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("at 06:00: %+v, want closed, next 02:00 tomorrow", st)
	}
}

// Starts that come before the window closes extend it: a window that opens every hour for two
// hours never closes between them.
func TestAtOverlappingStartsExtend(t *testing.T) {
	w := mustNew(t, "0 8-10 * * *", "2h", "UTC")
	st := w.At(time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC))
	if !st.Open || !st.Closes.Equal(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v, want open until 12:00 (the 10:00 start lasts until then)", st)
	}
	// A window open all the time is open, with a close far away, and the loop is bounded.
	st = mustNew(t, "* * * * *", "24h", "UTC").At(time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC))
	if !st.Open || st.Closes.Before(time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)) {
		t.Fatalf("%+v, want open for at least a day", st)
	}
}

// The schedule is read in its time zone, daylight saving time included: 02:30 in Berlin is
// 01:30 UTC in winter and 00:30 UTC in summer, and on the night clocks go forward (29 March
// 2026, 02:00 → 03:00) it does not exist, so the window opens the next night.
func TestAtTimeZoneAndDST(t *testing.T) {
	w := mustNew(t, "30 2 * * *", "1h", "Europe/Berlin")
	winter := w.At(time.Date(2026, 1, 15, 1, 45, 0, 0, time.UTC))
	if !winter.Open || !winter.Closes.Equal(time.Date(2026, 1, 15, 2, 30, 0, 0, time.UTC)) {
		t.Errorf("winter, 01:45 UTC: %+v, want open until 02:30 UTC (03:30 CET)", winter)
	}
	summer := w.At(time.Date(2026, 7, 15, 0, 45, 0, 0, time.UTC))
	if !summer.Open || !summer.Closes.Equal(time.Date(2026, 7, 15, 1, 30, 0, 0, time.UTC)) {
		t.Errorf("summer, 00:45 UTC: %+v, want open until 01:30 UTC (03:30 CEST)", summer)
	}
	// The evening before clocks go forward: the next start is not 02:30 on the 29th, which
	// does not exist in Berlin, but 02:30 CEST on the 30th.
	st := w.At(time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC))
	if st.Open || !st.Next.Equal(time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC)) {
		t.Errorf("before the spring change: %+v, want closed, next 2026-03-30 00:30 UTC", st)
	}
	if got := st.Next.Format("2006-01-02 15:04 MST"); got != "2026-03-30 02:30 CEST" {
		t.Errorf("next start reads %q in the window's zone, want 2026-03-30 02:30 CEST", got)
	}
}

// A schedule with no start within cron's horizon never opens, and says so with a zero Next.
func TestAtNeverOpens(t *testing.T) {
	st := mustNew(t, "0 0 30 2 *", "1h", "UTC").At(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	if st.Open || !st.Next.IsZero() {
		t.Fatalf("%+v, want closed with no next start", st)
	}
}
