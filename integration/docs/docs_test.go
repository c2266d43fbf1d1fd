// Package docs checks the Go code of the repository's user documentation,
// README.md and the pages docs/*.md: every ```go block compiles and passes
// go vet, so the documentation cannot fall behind the API.
//
// A block that begins with "package" is a program and is built as it is.
// A block of declarations (it begins with "func") is a test file. Any
// other block is a fragment: its statements are wrapped in
//
//	func snippetN(ctx context.Context) error { ...; return nil }
//
// in a package that declares the names fragments take as given (c, urls,
// clients, rdb, provider, tp, m, qty, job: see given below); its locals
// are marked used, and imports are added for the packages it names.
// Placeholders must be Go: "if err != nil { return err }", "// ...".
// A block meant to be incomplete is marked by the line
// "<!-- snippet: partial -->" right before it; it is only parsed.
package docs

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// snippet is one ```go block of a documentation page.
type snippet struct {
	file    string // the page, relative to the repository's root
	line    int    // of its first code line in file
	code    string
	partial bool
}

var fence = regexp.MustCompile("(?s)(<!-- snippet: partial -->\\s*\\n)?```go\\n(.*?)```")

// snippets returns the ```go blocks of the page file (relative to root).
func snippets(t *testing.T, root, file string) []snippet {
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	for _, m := range fence.FindAllSubmatchIndex(b, -1) {
		out = append(out, snippet{file: file, line: bytes.Count(b[:m[4]], []byte("\n")) + 1, code: string(b[m[4]:m[5]]), partial: m[2] >= 0})
	}
	return out
}

// knownImports are the packages a fragment may name without importing.
var knownImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "log": "log", "time": "time", "testing": "testing", "slog": "log/slog",
	"redlock":     "github.com/redlock-go/redlock",
	"fence":       "github.com/redlock-go/redlock/fence",
	"redlockotel": "github.com/redlock-go/redlock/redlockotel",
	"redlocktest": "github.com/redlock-go/redlock/redlocktest",
	"redis":       "github.com/redis/go-redis/v9",
	"transport":   "github.com/redlock-go/redlock/transport",
	"rueidisconn": "github.com/redlock-go/redlock/rueidisconn",
	"rueidis":     "github.com/redis/rueidis",
	"valkeyconn":  "github.com/redlock-go/redlock/valkeyconn",
	"valkey":      "github.com/valkey-io/valkey-go",
	"otel":        "go.opentelemetry.io/otel",
	"metric":      "go.opentelemetry.io/otel/metric",
	"trace":       "go.opentelemetry.io/otel/trace",
}

// given declares the names fragments use without declaring them.
const given = `package snippets

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlocktest"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

var (
	c        *redlock.Client
	urls     []string
	clients  []redis.UniversalClient
	rdb      redis.UniversalClient
	provider metric.MeterProvider
	tp       trace.TracerProvider
	m        *redlockotel.Metrics
	qty      int64
	job      func(context.Context) error
	cluster  *redlocktest.Cluster
	t        *testing.T
)
`

// pages are the documentation pages whose Go code is checked: README.md
// and every docs/*.md (a page added there is checked without a change
// here).
func pages(t *testing.T, root string) []string {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestDocSnippets(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var all []snippet
	for _, page := range pages(t, root) {
		s := snippets(t, root, page)
		if page == "README.md" && len(s) == 0 {
			t.Fatal("no ```go block found in README.md")
		}
		all = append(all, s...)
	}
	dir, err := os.MkdirTemp(".", "snippets-") // inside this module, so that its requirements resolve
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var frag strings.Builder
	tests := false
	for i, s := range all {
		code := strings.TrimSpace(s.code)
		switch {
		case s.partial:
			if _, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+code+"\n}", 0); err != nil {
				t.Errorf("%s:%d: partial snippet does not parse as statements: %v", s.file, s.line, err)
			}
		case strings.HasPrefix(code, "package "):
			write(t, filepath.Join(dir, fmt.Sprintf("program%d", i), "main.go"), fmt.Sprintf("//line %s:%d\n%s\n", s.file, s.line, code))
		case strings.HasPrefix(code, "func "):
			tests = true
			write(t, filepath.Join(dir, "tests", fmt.Sprintf("snippet%d_test.go", i)), withImports(t, "snippets_test", fmt.Sprintf("//line %s:%d\n%s\n", s.file, s.line, code)))
		default:
			fmt.Fprintf(&frag, "func snippet%d(ctx context.Context) error {\n//line %s:%d\n%s\n%s\nreturn nil\n}\n\n", i, s.file, s.line, code, markUsed(t, s, code))
		}
	}
	if frag.Len() > 0 {
		write(t, filepath.Join(dir, "fragments", "given.go"), given)
		write(t, filepath.Join(dir, "fragments", "fragments.go"), withImports(t, "snippets", frag.String()))
	}
	goCmd(t, "vet", "./"+filepath.Base(dir)+"/...")
	if tests {
		goCmd(t, "test", "-count=1", "./"+filepath.Base(dir)+"/tests/")
	}
}

// markUsed returns "_ = x" for every name the fragment's top level
// declares with :=, so that a fragment need not use all it declares.
func markUsed(t *testing.T, s snippet, code string) string {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+code+"\n}", 0)
	if err != nil {
		t.Errorf("%s:%d: snippet does not parse: %v", s.file, s.line, err)
		return ""
	}
	seen := map[string]bool{}
	var names []string
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, e := range as.Lhs {
				if id, ok := e.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
					seen[id.Name] = true
					names = append(names, id.Name)
				}
			}
		}
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString("_ = " + n + "\n")
	}
	return b.String()
}

// withImports returns src (declarations, no package clause) as a file of
// package pkg importing the known packages it names.
func withImports(t *testing.T, pkg, src string) string {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, 0)
	if err != nil {
		t.Fatalf("snippets do not parse: %v\n%s", err, src)
	}
	uses := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil && knownImports[id.Name] != "" {
				uses[knownImports[id.Name]] = true
			}
		}
		return true
	})
	if pkg == "snippets" {
		uses["context"] = true // the wrapper's parameter
	}
	var paths []string
	for p := range uses {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n", pkg)
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\n" + src)
	return b.String()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in this module and fails the test with its
// output (positions point into the pages) unless it succeeds.
func goCmd(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
