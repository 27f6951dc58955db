// Command hclblocks checks that every ```hcl, ```terraform and ```tf code block of the Markdown
// files it is given (files, or directories searched for *.md and *.md.tmpl) parses as HCL native
// syntax, as Terraform and OpenTofu would read it. It prints each block that does not, with its
// file and line, and exits 1.
//
//	go run ./hclblocks ../README.md ../docs ../templates
//
// A block is parsed as it stands: a fragment the reader is meant to complete (`...`) does not
// parse and is reported; write it as a comment instead.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// languages are the fence info strings whose blocks are checked.
var languages = map[string]bool{"hcl": true, "terraform": true, "tf": true}

type block struct {
	line int // of the block's first line of code, 1-based
	text string
}

// blocks returns the Terraform code blocks of a Markdown document.
func blocks(text string) ([]block, error) {
	var out []block
	var cur *block
	var body strings.Builder
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				marker := trimmed[:3]
				info := strings.Fields(strings.TrimLeft(trimmed, marker[:1]))
				fence = strings.Repeat(marker[:1], len(trimmed)-len(strings.TrimLeft(trimmed, marker[:1])))
				if len(info) > 0 && languages[strings.ToLower(info[0])] {
					cur = &block{line: n + 1}
					body.Reset()
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimLeft(trimmed, fence[:1]) == "" {
			if cur != nil {
				cur.text = body.String()
				out = append(out, *cur)
				cur = nil
			}
			fence = ""
			continue
		}
		if cur != nil {
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if fence != "" {
		return out, fmt.Errorf("a code fence opened is never closed")
	}
	return out, nil
}

// check parses the blocks of one file and reports the ones that do not parse.
func check(path string) (found, bad int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	bs, err := blocks(string(data))
	if err != nil {
		return 0, 1, fmt.Errorf("%s: %w", path, err)
	}
	for _, b := range bs {
		_, diags := hclsyntax.ParseConfig([]byte(b.text), path, hcl.Pos{Line: b.line, Column: 1, Byte: 0})
		if diags.HasErrors() {
			bad++
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				where := path
				if d.Subject != nil {
					where = fmt.Sprintf("%s:%d", path, d.Subject.Start.Line)
				}
				fmt.Fprintf(os.Stderr, "%s: %s: %s\n", where, d.Summary, d.Detail)
			}
		}
	}
	return len(bs), bad, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hclblocks FILE|DIR...")
		os.Exit(2)
	}
	var files []string
	for _, arg := range os.Args[1:] {
		err := filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".md.tmpl")) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	total, bad, failed := 0, 0, false
	for _, f := range files {
		n, b, err := check(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
		}
		total += n
		bad += b
	}
	fmt.Fprintf(os.Stderr, "[hclblocks] %d Terraform code blocks in %d files, %d do not parse\n", total, len(files), bad)
	if bad > 0 || failed || total == 0 {
		os.Exit(1)
	}
}
