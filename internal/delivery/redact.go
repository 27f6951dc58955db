package delivery

import (
	"cmp"
	"slices"
	"strings"
)

// redactedText replaces what an error message says of sensitive values.
const redactedText = "(sensitive value)"

// minRedactLength is the length (in bytes, after trimming white space) under which a value is
// not replaced. Replacing every occurrence of a text that short ("1", "app", "yes") would garble
// messages past reading — it occurs in field names, numbers and object names — and hide little.
// ignoreattr.SensitiveValues, which builds Spec.Redact, leaves such values out already (see
// ignoreattr.MinSensitiveLength); this keeps any other list from garbling messages.
const minRedactLength = 4

// redacted is an error whose message has the values of Spec.Redact replaced: an API server
// may echo an object it refused ("Invalid value: ..."), an admission policy may quote a Secret
// in its denial, and error messages reach diagnostics, the ledger (and so the state's
// invalid_revisions), the progress record and logs. It unwraps to the original, so that its
// class (blame.Of) is still found.
type redacted struct {
	err error
	msg string
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// redact returns err with values replaced in its message; err itself when none occurs.
//
// Values are looked for longest first, so that a value containing another is replaced whole,
// and all in the original message: every stretch of text that lies in an occurrence of some
// value is covered, overlapping and adjoining stretches by one replacement. So no part of a
// value shows because a shorter one overlapping it was replaced first, and the replacement text
// itself is never searched for values.
func redact(err error, values []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	sorted := slices.SortedFunc(slices.Values(values), func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	msg := err.Error()
	var spans [][2]int // [start, end) of each occurrence
	for _, v := range slices.Compact(sorted) {
		if len(strings.TrimSpace(v)) < minRedactLength {
			continue
		}
		for from := 0; ; {
			i := strings.Index(msg[from:], v)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{from + i, from + i + len(v)})
			from += i + 1 // occurrences may overlap
		}
	}
	if len(spans) == 0 {
		return err
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var out strings.Builder
	last := 0 // end of the text copied or covered so far
	for i := 0; i < len(spans); {
		start, end := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= end; i++ {
			end = max(end, spans[i][1])
		}
		out.WriteString(msg[last:start])
		out.WriteString(redactedText)
		last = end
	}
	out.WriteString(msg[last:])
	return &redacted{err: err, msg: out.String()}
}
