# failures.awk: from verbose `go test` logs (lines may carry "[lane] " prefixes, as tools/testacc.sh
# writes them), prints each failing test's "--- FAIL" line with the first line of every message its
# test file logged (t.Error, t.Fatal and t.Log alike: the last ones before the failure say what it
# was doing), plus the CLI's "Error:" lines with the four lines after each, panics, timeouts and beds that
# did not come up. A CI log is often read from its tail only; this is that tail.
{
  line = $0; prefix = ""
  while (match(line, /^\[[^]]*\] /)) { prefix = prefix substr(line, 1, RLENGTH); line = substr(line, RLENGTH + 1) }
  if (line ~ /^=== (RUN|CONT|PAUSE) /) { split(line, f, / +/); current[prefix] = f[3]; next }
  if (line ~ /^ *--- FAIL: /) {
    split(line, f, / +/); name = (f[1] == "") ? f[4] : f[3]
    print prefix line
    key = prefix SUBSEP name
    if (key in said) { n = split(said[key], msgs, "\n"); for (i = (n > 13 ? n - 12 : 1); i < n; i++) print msgs[i] }
    next
  }
  if (line ~ /^ +[A-Za-z0-9_]+_test\.go:[0-9]+: /) {
    key = prefix SUBSEP current[prefix]
    said[key] = said[key] prefix substr(line, 1, 400) "\n"
    next
  }
  if (after > 0 && line ~ /[^ │|]/) { print prefix substr(line, 1, 400); after-- }
  if (line ~ /^[ │|]*Error: / || line ~ /^panic:|test timed out|did not come up/) { print prefix substr(line, 1, 400); after = (line ~ /Error: /) ? 4 : 0 }
}
