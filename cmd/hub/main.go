// Command hub is runhub's one binary: `hub serve` (the default) runs a hub
// replica; `hub runner` executes runs from the Redis run queue; `hub token`
// mints an HS256 token with RUNHUB_JWT_SECRET; `hub import hermes-webui`
// brings a hermes-webui state directory's sessions into the journal; `hub healthcheck` probes a
// health endpoint (the container image's HEALTHCHECK); `hub version` (or
// `hub --version`) prints the build's version; `hub help [command]` (or
// -h on any command) prints the usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal begins a graceful stop (the runs get the shutdown
	// grace); a second one ends the process at once (its open runs end
	// interrupted at the next start).
	context.AfterFunc(ctx, stop)
	os.Exit(runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain runs hub with args and returns its exit status: 0, 1 when the
// command failed, 2 for a command line it cannot parse (one line, with the
// hint of -h).
// Help (-h, -help, --help, hub help [command]) goes to stdout with 0.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout)
	var fe *flagError
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "hub %s: %v; see 'hub %s -h'\n", fe.cmd, fe.err, fe.cmd)
		return 2
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "hub: %v\n\n", ue)
		printCommands(stderr)
		return 2
	}
	fmt.Fprintln(stderr, "hub:", err)
	return 1
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cmd, named := "serve", false
	if len(args) > 0 && len(args[0]) > 0 && (args[0][0] != '-' || args[0] == "--version" || args[0] == "-version") {
		cmd, args, named = args[0], args[1:], true
	}
	// help prints the usage asked for: the overview for a bare hub -h,
	// else the command's.
	help := func(err error) error {
		if !errors.Is(err, flag.ErrHelp) {
			return err
		}
		if named {
			printCommandUsage(stdout, cmd)
		} else {
			printOverview(stdout)
		}
		return nil
	}
	switch cmd {
	case "serve":
		cfg, err := parseServeConfig(args, os.Getenv)
		if err != nil {
			return help(err)
		}
		return Serve(ctx, cfg)
	case "runner":
		cfg, err := parseRunnerConfig(args, os.Getenv)
		if err != nil {
			return help(err)
		}
		return RunRunner(ctx, cfg)
	case "token":
		cfg, err := parseTokenConfig(args, os.Getenv)
		if err != nil {
			return help(err)
		}
		return MintToken(stdout, cfg)
	case "import":
		cfg, err := parseImportConfig(args, os.Getenv)
		if err != nil {
			return help(err)
		}
		var progress io.Writer
		if cfg.Progress == "on" || cfg.Progress == "auto" && isTerminal(os.Stderr) {
			progress = os.Stderr
		}
		return Import(ctx, cfg, stdout, progress)
	case "healthcheck":
		cfg, err := parseHealthcheckConfig(args, os.Getenv)
		if err != nil {
			return help(err)
		}
		return Healthcheck(ctx, cfg)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "runhub", version)
		return nil
	case "help":
		switch {
		case len(args) == 0:
			printOverview(stdout)
		case len(args) == 1 && commandFlags(args[0]) != nil:
			printCommandUsage(stdout, args[0])
		case len(args) == 1 && (args[0] == "version" || args[0] == "help"):
			printOverview(stdout)
		default:
			return &usageError{fmt.Sprintf("help %s: no such command (want serve, runner, token, import, healthcheck, version or help)", strings.Join(args, " "))}
		}
		return nil
	default:
		return &usageError{fmt.Sprintf("unknown command %q (want serve, runner, token, import, healthcheck, version or help)", cmd)}
	}
}
