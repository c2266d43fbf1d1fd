package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestZZResults prints the results table and writes it to -chaos.out
// (default: docs/chaos.md after a full run; a short run does not overwrite
// the committed table of the last full one). It runs last: go test runs tests in source order, files sorted by name, and
// this file sorts after the scenario files.
func TestZZResults(t *testing.T) {
	resMu.Lock()
	defer resMu.Unlock()
	if len(results) == 0 && len(typedResults) == 0 {
		t.Skip("no scenarios ran")
	}
	mode := "short"
	if full() {
		mode = "full"
	}
	plain := ""
	if len(results) > 0 {
		plain = Table(results)
	}
	tab := fmt.Sprintf("Chaos results (%s mode, %s)\n\n%s", mode, time.Now().UTC().Format(time.RFC3339), plain+TypesTable(typedResults))
	fmt.Println(tab)
	out := *outFlag
	if out == "" && full() {
		out = filepath.Join("..", "..", "docs", "chaos.md")
	}
	if out == "" {
		return
	}
	if !filepath.IsAbs(out) {
		out, _ = filepath.Abs(out)
	}
	if err := os.WriteFile(out, []byte(tab), 0o644); err != nil {
		t.Error(err)
	}
	t.Logf("results written to %s", out)
}
