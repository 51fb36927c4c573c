package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/configuration.md")

const configDoc = "../../docs/configuration.md"

// referenceSections are the commands whose settings docs/configuration.md
// lists, each built by the same code that parses them.
func referenceSections() []struct {
	name  string
	flags *flagSet
} {
	none := func(string) string { return "" }
	var s ServeConfig
	var r RuntimeConfig
	var h HealthcheckConfig
	var im ImportConfig
	return []struct {
		name  string
		flags *flagSet
	}{
		{"serve", serveFlags(&s, none)},
		{"runner", runnerFlags(&r, none)},
		{"import", importFlags(&im, none)},
		{"healthcheck", healthcheckFlags(&h, none)},
	}
}

// renderReference renders one command's settings as a markdown table:
// every flag with its variable, its default as written in the code and its
// meaning, then the variables that have no flag.
func renderReference(f *flagSet) string {
	var b strings.Builder
	b.WriteString("| flag | environment variable | default | meaning |\n|---|---|---|---|\n")
	f.VisitAll(func(fl *flag.Flag) {
		env := f.envOf[fl.Name]
		usage := strings.TrimSuffix(fl.Usage, " ("+env+")")
		b.WriteString("| `-" + fl.Name + "` | `" + env + "` | " + cell(f.defOf[fl.Name]) + " | " + usage + " |\n")
	})
	for _, e := range f.envOnly {
		b.WriteString("| — | `" + e.name + "` | empty | " + e.usage + " |\n")
	}
	return b.String()
}

func cell(def string) string {
	if def == "" {
		return "empty"
	}
	return "`" + def + "`"
}

var generated = regexp.MustCompile(`(?s)(<!-- BEGIN GENERATED: (\w+) .*?-->\n).*?(<!-- END GENERATED: (\w+) -->)`)

// docs/configuration.md lists every flag and environment variable of hub
// serve, hub runner and hub healthcheck with its default, exactly as the
// code defines them: its tables are generated from the flag sets
// (go test ./cmd/hub -run TestConfigurationReference -update rewrites
// them), so a flag added, removed or changed without the reference fails
// here.
func TestConfigurationReference(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	want := map[string]string{}
	for _, s := range referenceSections() {
		if s.flags.err != nil {
			t.Fatalf("%s: %v", s.name, s.flags.err)
		}
		want[s.name] = renderReference(s.flags)
	}
	seen := map[string]bool{}
	out := generated.ReplaceAllStringFunc(doc, func(block string) string {
		m := generated.FindStringSubmatch(block)
		name := m[2]
		if m[4] != name {
			t.Fatalf("generated section %s ends as %s", name, m[4])
		}
		seen[name] = true
		table, ok := want[name]
		if !ok {
			t.Errorf("docs/configuration.md has a generated section %q for no command", name)
			return block
		}
		return m[1] + table + m[3]
	})
	for name := range want {
		if !seen[name] {
			t.Errorf("docs/configuration.md lacks the generated section of hub %s", name)
		}
	}
	if out == doc {
		return
	}
	if *update {
		if err := os.WriteFile(configDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote docs/configuration.md")
		return
	}
	t.Fatalf("docs/configuration.md is out of date with the flags; run\n\tgo test ./cmd/hub -run TestConfigurationReference -update\nwant:\n%s", out)
}

// Every RUNHUB_ variable the binary reads is in the reference: a getenv
// that bypasses the flag sets cannot hide a setting.
func TestConfigurationReference_EveryVariable(t *testing.T) {
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*.go")
	re := regexp.MustCompile(`"(RUNHUB_[A-Z0-9_]+)"`)
	vars := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			vars[m[1]] = true
		}
	}
	if len(vars) < 20 {
		t.Fatalf("found only %d variables in the code", len(vars))
	}
	var missing []string
	for v := range vars {
		if !strings.Contains(string(raw), "`"+v+"`") {
			missing = append(missing, v)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("docs/configuration.md does not list %v", missing)
	}
}

// The defaults written in the code are the ones the flags take: a default
// string that does not parse would be silently wrong in the reference.
func TestConfigurationDefaults(t *testing.T) {
	for _, s := range referenceSections() {
		s.flags.VisitAll(func(fl *flag.Flag) {
			def, ok := s.flags.defOf[fl.Name]
			if !ok || s.flags.envOf[fl.Name] == "" {
				t.Errorf("%s -%s: no default or environment variable recorded", s.name, fl.Name)
				return
			}
			old := fl.Value.String()
			if err := fl.Value.Set(def); err != nil {
				t.Errorf("%s -%s: default %q does not parse: %v", s.name, fl.Name, def, err)
				return
			}
			got := fl.Value.String()
			fl.Value.Set(old)
			if got != fl.DefValue {
				t.Errorf("%s -%s: the code's default %q is %s, the flag's %s", s.name, fl.Name, def, got, fl.DefValue)
			}
		})
	}
}
