package records

import (
	"bytes"
	"testing"
)

// TestCompressChunksRepeats: the same bytes compress to the same chunks and digest, from the
// last call's result (the records of one revision on many clusters); a caller that changes its
// input afterwards, or appends to the chunks it got, changes nothing for the next caller; and
// another chunk size is compressed afresh.
func TestCompressChunksRepeats(t *testing.T) {
	raw := bytes.Repeat([]byte(`{"kind":"ConfigMap","metadata":{"name":"x"}}`), 200)
	first, digest, err := compressChunks(raw, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(bytes.Join(first, nil))
	raw[0] = '[' // the caller's bytes change after the call
	_ = append(first, []byte("more"))

	raw[0] = '{'
	again, againDigest, err := compressChunks(raw, 64)
	if err != nil {
		t.Fatal(err)
	}
	if againDigest != digest || !bytes.Equal(bytes.Join(again, nil), want) || len(again) != len(first) {
		t.Fatalf("the same bytes compressed to %d chunks, digest %s; want %d chunks, digest %s", len(again), againDigest, len(first), digest)
	}
	if out, err := decompressChunks(again, againDigest, 1<<20); err != nil || !bytes.Equal(out, raw) {
		t.Fatalf("the repeated chunks decompress to %d bytes (%v), want the %d given", len(out), err, len(raw))
	}

	changed := bytes.Clone(raw)
	changed[len(changed)-2] = 'y'
	if _, d, _ := compressChunks(changed, 64); d == digest {
		t.Fatal("other bytes were given the last call's digest")
	}
	wide, _, err := compressChunks(raw, 1<<20)
	if err != nil || len(wide) != 1 {
		t.Fatalf("another chunk size gave %d chunks (%v), want 1", len(wide), err)
	}
}

// BenchmarkRecordRoundTrip is one cluster's revision record made and read back, as the Flux
// engine does for each cluster it reaches: a few KiB of manifests, each record its own bytes (the
// cluster is in its key), so the last-input memo does not help.
func BenchmarkRecordRoundTrip(b *testing.B) {
	manifests := bytes.Repeat([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},"spec":{"replicas":1}},`), 40)
	manifests = append(append([]byte{'['}, manifests[:len(manifests)-1]...), ']')
	lim := readLimits{size: MaxRevisionRecordSize, chunks: MaxRecordChunks}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		p := payload{RolloutKey: Key{Kind: "rollout", Namespace: "fleet", Name: "web@cluster-" + string(rune('a'+i%26))}, Revision: "v2", Manifests: manifests}
		chunks, digest, err := encodePayload(p, ChunkSize, lim)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decodePayload(chunks, digest, MaxRevisionRecordSize); err != nil {
			b.Fatal(err)
		}
	}
}
