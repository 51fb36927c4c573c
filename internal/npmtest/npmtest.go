// Package npmtest installs a directory of pinned npm packages (a
// package.json, its package-lock.json and the scripts beside them) for a
// test that runs official JavaScript clients with node.
package npmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Install copies files from src (package.json and package-lock.json among
// them) into a temporary directory, runs npm ci there and returns node's
// path and the directory. what names the packages in the failure message.
// A missing node or npm fails the test: these tests never skip.
func Install(t testing.TB, what, src string, files ...string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (apt-get install nodejs npm): %s cannot run", what)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not installed (apt-get install npm): %s cannot be installed", what)
	}
	dir = t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	return node, dir
}

// RunJSON runs node script in dir (with env added and args), within 90 s,
// and decodes what it prints into out; a script that fails fails the test
// with the end of its stderr (the first lines may echo minified sources).
func RunJSON(t testing.TB, node, dir string, env []string, out any, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		errText := stderr.String()
		if len(errText) > 3000 {
			errText = "…" + errText[len(errText)-3000:]
		}
		t.Fatalf("node %s %v: %v\nstderr: %s\nstdout: %s", script, args, err, errText, stdout.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s output %q: %v", script, stdout.String(), err)
	}
}
