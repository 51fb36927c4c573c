package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// commands are hub's commands, in the order the overview lists them.
var commands = []struct{ name, summary string }{
	{"serve", "run a hub replica: the WebSocket and HTTP API, the web UI, /healthz, /readyz, /metrics (the default command)"},
	{"runner", "execute runs from the Redis run queue (scaled mode; needs RUNHUB_REDIS_URL)"},
	{"token", "mint a development HS256 token with RUNHUB_JWT_SECRET"},
	{"import", "import hermes-webui's sessions: hub import hermes-webui STATE_DIR (docs/hermes-webui.md)"},
	{"healthcheck", "GET a health endpoint and exit 0 on 200 (the container image's HEALTHCHECK)"},
	{"version", "print the build's version (also hub --version)"},
	{"help", "print this help, or a command's: hub help serve"},
}

// commandIntro says what a command does, above its flags.
var commandIntro = map[string]string{
	"serve":       "Usage: hub [serve] [flags]\n\nRuns a hub replica: the WebSocket and HTTP API, the embedded web UI,\n/healthz, /readyz and /metrics, until SIGTERM or SIGINT.",
	"runner":      "Usage: hub runner [flags]\n\nExecutes runs from the Redis run queue (scaled mode) until SIGTERM or\nSIGINT; it needs RUNHUB_REDIS_URL.",
	"token":       "Usage: hub token -sub SUBJECT [flags]\n\nPrints an HS256 token signed with RUNHUB_JWT_SECRET (development and\nscripts; production tokens come from the identity provider).",
	"import":      "Usage: hub import hermes-webui STATE_DIR [flags]\n\nImports a hermes-webui state directory's sessions (sidecars, run journals,\nturn journals) into the journal, idempotently: a second import changes\nnothing. Stop the journal's hubs and runners first.",
	"healthcheck": "Usage: hub healthcheck [flags]\n\nGETs a URL and exits 0 on 200, 1 otherwise.",
}

// commandFlags builds a command's flag set, with code defaults (no
// environment), for its usage.
func commandFlags(name string) *flagSet {
	none := func(string) string { return "" }
	switch name {
	case "serve":
		var c ServeConfig
		return serveFlags(&c, none)
	case "runner":
		var c RuntimeConfig
		return runnerFlags(&c, none)
	case "token":
		var c TokenConfig
		return tokenFlags(&c, none)
	case "import":
		var c ImportConfig
		return importFlags(&c, none)
	case "healthcheck":
		var c HealthcheckConfig
		return healthcheckFlags(&c, none)
	}
	return nil
}

// flagError is a command line a flag set cannot parse: an unknown flag, a
// flag without its value, a value that does not parse, a stray argument.
// hub prints it as one line, with the hint of the command's -h, and exits
// 2 (the usage itself is 150 lines that would scroll the error away).
type flagError struct {
	cmd string
	err error
}

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// usageError is a command hub does not know (exit 2, after the overview).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// parseFlags parses args with f: -h, -help and --help return flag.ErrHelp;
// any other parse error is a *flagError.
func parseFlags(f *flagSet, args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return newFlagError(f, err)
	}
	if f.NArg() > 0 {
		return &flagError{cmd: f.Name(), err: fmt.Errorf("unexpected arguments %v", f.Args())}
	}
	return f.err // a variable that does not parse
}

// printOverview writes hub's commands, then the flags of serve (the
// default command).
func printOverview(w io.Writer) {
	fmt.Fprintf(w, "runhub %s: a real-time hub for observing and steering AI-agent runs.\n\n", version)
	printCommands(w)
	fmt.Fprintln(w, "Without a command, hub runs serve:")
	fmt.Fprintln(w)
	printFlags(w, commandFlags("serve"))
}

// printCommands writes hub's commands.
func printCommands(w io.Writer) {
	fmt.Fprintln(w, "Usage: hub [command] [flags]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n'hub <command> -h' (or 'hub help <command>') lists a command's flags.")
}

// printCommandUsage writes what a command does and its flags.
func printCommandUsage(w io.Writer, name string) {
	fmt.Fprintln(w, commandIntro[name])
	fmt.Fprintln(w)
	printFlags(w, commandFlags(name))
}

// printFlags writes every flag of f with its type, meaning, environment
// variable and default as written in the code (never the value the
// environment holds now: it may be a secret), then the variables that have
// no flag.
func printFlags(w io.Writer, f *flagSet) {
	fmt.Fprintln(w, "Flags (a flag wins over its environment variable, which wins over the default):")
	f.VisitAll(func(fl *flag.Flag) {
		typ, usage := flag.UnquoteUsage(fl)
		env := f.envOf[fl.Name]
		usage = strings.TrimSuffix(usage, " ("+env+")")
		fmt.Fprintf(w, "  -%s", fl.Name)
		if typ != "" {
			fmt.Fprintf(w, " %s", typ)
		}
		fmt.Fprintf(w, "\n        %s\n        ", usage)
		def, ok := f.defOf[fl.Name]
		if !ok {
			def = fl.DefValue
		}
		if def == "" {
			def = "empty"
		}
		if env != "" {
			fmt.Fprintf(w, "%s, default %s\n", env, def)
		} else {
			fmt.Fprintf(w, "default %s\n", def)
		}
	})
	if len(f.envOnly) > 0 {
		fmt.Fprintln(w, "\nEnvironment only:")
		for _, e := range f.envOnly {
			fmt.Fprintf(w, "  %s\n        %s\n", e.name, e.usage)
		}
	}
	fmt.Fprintln(w, "\nEvery setting, with what depends on what: docs/configuration.md.")
}
