package main

import (
	"flag"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"
)

// This file holds what names a settings mistake: the expected form of each
// kind of value, the one-line error of a command line that does not parse,
// the bounds of the numeric settings, and the warning about a RUNHUB_
// variable no command reads.

// expectedForm says what a value of a flag's type looks like, for errors.
// typ is the type flag.UnquoteUsage names ("" for a bool).
func expectedForm(typ string) string {
	switch typ {
	case "duration":
		return "a duration such as 500ms, 30s, 5m or 1h30m"
	case "int":
		return "an integer"
	case "float":
		return "a number"
	case "":
		return "true or false (or 1, 0)"
	}
	return "a " + typ
}

// goFlagValue matches the flag package's error for a value that does not
// parse: `invalid value "x" for flag -name: …` (`invalid boolean value "x"
// for -name: …` for a bool).
var goFlagValue = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^\s:]+): `)

// goFlagUnknown matches its error for a flag the set does not define.
var goFlagUnknown = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)

// newFlagError makes a parse error of f one line: a value that does not
// parse names the flag and the form it wants; an unknown flag names the
// nearest flag f defines.
func newFlagError(f *flagSet, err error) *flagError {
	msg := err.Error()
	if m := goFlagValue.FindStringSubmatch(msg); m != nil {
		if fl := f.Lookup(m[2]); fl != nil {
			typ, _ := flag.UnquoteUsage(fl)
			err = fmt.Errorf("-%s %s: want %s", fl.Name, m[1], expectedForm(typ))
		}
	} else if m := goFlagUnknown.FindStringSubmatch(msg); m != nil {
		var names []string
		f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
		if near, d := nearest(m[1], names); near != "" && d <= maxTypo(m[1]) {
			err = fmt.Errorf("%v (did you mean -%s?)", err, near)
		}
	}
	return &flagError{cmd: f.Name(), err: err}
}

// maxTypo is the largest edit distance from name that still reads as a
// misspelling of a known name, rather than another word.
func maxTypo(name string) int { return max(2, len(name)/4) }

// nearest returns the name of known closest to name by edit distance (the
// first in sorted order on a tie) and that distance; "" when known is empty.
func nearest(name string, known []string) (string, int) {
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	best, bestD := "", -1
	for _, k := range sorted {
		if d := editDistance(name, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD
}

// editDistance is the Levenshtein distance of a and b (insertions,
// deletions and substitutions of bytes; the names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// knownEnv is every RUNHUB_ variable some command of hub reads: a
// container's environment is shared by `hub serve`, `hub runner` and `hub
// healthcheck`, so one command's variable is no mistake for another.
func knownEnv() []string {
	seen := map[string]bool{}
	for _, c := range commands {
		f := commandFlags(c.name)
		if f == nil {
			continue
		}
		for _, env := range f.envOf {
			seen[env] = true
		}
		for _, e := range f.envOnly {
			seen[e.name] = true
		}
	}
	delete(seen, "")
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// envIgnored tells the RUNHUB_ variables that are nobody's mistake though
// hub does not read them; nil in the binary (the tests, which run their
// binary as hub, set it for their own variables).
var envIgnored func(name string) bool

// unknownVar is a RUNHUB_ variable no command reads, and the known name
// nearest to it.
type unknownVar struct{ name, nearest string }

// unknownEnv returns the RUNHUB_ variables of environ (NAME=value lines)
// that no command of hub reads, in sorted order, each with its nearest
// known name. The values are never looked at: they may be secrets.
func unknownEnv(environ []string) []unknownVar {
	known := knownEnv()
	isKnown := map[string]bool{}
	for _, k := range known {
		isKnown[k] = true
	}
	var out []unknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "RUNHUB_") || isKnown[name] || (envIgnored != nil && envIgnored(name)) {
			continue
		}
		near, _ := nearest(name, known)
		out = append(out, unknownVar{name, near})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// warnUnknownEnv logs, once at start-up, each RUNHUB_ variable of environ
// that no command reads, with the nearest known name: a misspelt variable
// is otherwise ignored without a word.
func warnUnknownEnv(log *slog.Logger, environ []string) {
	for _, u := range unknownEnv(environ) {
		log.Warn("unknown environment variable ignored: "+u.name+" is no runhub setting; did you mean "+u.nearest+"?",
			"var", u.name, "nearest", u.nearest)
	}
}

// checkBounds refuses the numeric settings of a RuntimeConfig that are out
// of range, naming where each came from: a negative or zero limit would
// start a process that refuses every run, or panics later.
func (f *flagSet) checkBounds(c *RuntimeConfig) error {
	if c.MaxRuns < 1 {
		return fmt.Errorf("%s %d: want at least 1 (runs executing at once)", f.source("max-runs"), c.MaxRuns)
	}
	if c.ClarifyTimeout <= 0 {
		return fmt.Errorf("%s %v: want a positive duration", f.source("clarify-timeout"), c.ClarifyTimeout)
	}
	for name, d := range map[string]time.Duration{"journal-sync-every": c.SyncEvery, "shutdown-grace": c.ShutdownGrace} {
		if d < 0 {
			return fmt.Errorf("%s %v: want 0 or a positive duration", f.source(name), d)
		}
	}
	return nil
}

// checkServeBounds refuses the numeric settings of `hub serve` that are
// out of range, naming where each came from.
func (f *flagSet) checkServeBounds(c *ServeConfig) error {
	if c.StatusInterval <= 0 {
		return fmt.Errorf("%s %v: want a positive duration", f.source("status-interval"), c.StatusInterval)
	}
	if c.Retention < 0 {
		return fmt.Errorf("%s %v: want 0 (keep forever) or a positive duration", f.source("retention"), c.Retention)
	}
	if c.JWTLeeway < 0 {
		return fmt.Errorf("%s %v: want 0 or a positive duration", f.source("jwt-leeway"), c.JWTLeeway)
	}
	if c.WSRate == 0 {
		return fmt.Errorf("%s 0: want a positive rate, or a negative one for no limit", f.source("ws-rate"))
	}
	if c.WSBurst < 1 {
		return fmt.Errorf("%s %d: want at least 1", f.source("ws-burst"), c.WSBurst)
	}
	if c.HelloTimeout == 0 {
		return fmt.Errorf("%s 0s: want a positive duration, or a negative one for no bound", f.source("hello-timeout"))
	}
	if c.FrameTimeout == 0 {
		return fmt.Errorf("%s 0s: want a positive duration, or a negative one for no bound", f.source("frame-timeout"))
	}
	return nil
}
