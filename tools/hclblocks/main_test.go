package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBlocksTakesTerraformFencesOnly(t *testing.T) {
	doc := "# x\n\n```terraform\na = 1\n```\n\n```yaml\nb: 2\n```\n\n  ```hcl\n  c = 3\n  ```\n\n````md\n```terraform\nnot = a block\n```\n````\n"
	bs, err := blocks(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].text != "a = 1\n" || bs[0].line != 4 || bs[1].text != "  c = 3\n" {
		t.Fatalf("blocks = %+v, want the terraform block at line 4 and the indented hcl block", bs)
	}
	if _, err := blocks("```terraform\na = 1\n"); err == nil {
		t.Fatal("an unclosed fence: no error")
	}
}

func TestCheckReportsWhatDoesNotParse(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.md")
	bad := filepath.Join(dir, "bad.md")
	if err := os.WriteFile(good, []byte("```terraform\nvariable \"k\" {\n  type      = string\n  ephemeral = true\n}\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The Atlantis guide's old advice: a single-line block with more than one argument.
	if err := os.WriteFile(bad, []byte("```terraform\nvariable \"k\" { type = string, ephemeral = true }\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, b, err := check(good); err != nil || n != 1 || b != 0 {
		t.Fatalf("good: %d blocks, %d bad, %v", n, b, err)
	}
	if n, b, err := check(bad); err != nil || n != 1 || b != 1 {
		t.Fatalf("bad: %d blocks, %d bad, %v; want the block reported", n, b, err)
	}
}
