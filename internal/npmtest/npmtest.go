// Package npmtest installs a directory of pinned npm packages (a
// package.json, its package-lock.json and the scripts beside them) for a
// test that runs official JavaScript clients with node.
package npmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Install copies files from src (package.json and package-lock.json among
// them) into a temporary directory, runs npm ci there and returns node's
// path and the directory. what names the packages in the failure message.
// A missing node or npm fails the test: these tests never skip.
func Install(t testing.TB, what, src string, files ...string) (node, dir string) {
	t.Helper()
	dirs := InstallAll(t, Package{What: what, Src: src, Files: files})
	return dirs[0].Node, dirs[0].Dir
}

// Package is one directory of pinned packages for InstallAll.
type Package struct {
	What  string   // names the packages in a failure message
	Src   string   // the directory holding them
	Files []string // what to copy: package.json, package-lock.json, scripts
}

// Installed is where InstallAll put a Package.
type Installed struct{ Node, Dir string }

// InstallAll is Install for several directories at once: npm ci waits on
// the registry most of its time, so the installs overlap. The answer is
// in pkgs' order.
func InstallAll(t testing.TB, pkgs ...Package) []Installed {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (apt-get install nodejs npm): %s cannot run", pkgs[0].What)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not installed (apt-get install npm): %s cannot be installed", pkgs[0].What)
	}
	out := make([]Installed, len(pkgs))
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	for i, p := range pkgs {
		dir := t.TempDir()
		out[i] = Installed{Node: node, Dir: dir}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = install(npm, dir, p)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", pkgs[i].What, err)
		}
	}
	return out
}

// install copies p's files into dir and runs npm ci there, within 5
// minutes.
func install(npm, dir string, p Package) error {
	for _, f := range p.Files {
		b, err := os.ReadFile(filepath.Join(p.Src, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	return nil
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
