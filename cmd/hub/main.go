// Command hub is runhub's one binary: `hub serve` (the default) runs a hub
// replica; `hub runner` executes runs from the Redis run queue; `hub token`
// mints an HS256 token with RUNHUB_JWT_SECRET; `hub healthcheck` probes a
// health endpoint (the container image's HEALTHCHECK); `hub version` (or
// `hub --version`) prints the build's version.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && (args[0][0] != '-' || args[0] == "--version" || args[0] == "-version") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		cfg, err := parseServeConfig(args, os.Getenv)
		if err != nil {
			return err
		}
		return Serve(ctx, cfg)
	case "runner":
		cfg, err := parseRunnerConfig(args, os.Getenv)
		if err != nil {
			return err
		}
		return RunRunner(ctx, cfg)
	case "token":
		cfg, err := parseTokenConfig(args, os.Getenv)
		if err != nil {
			return err
		}
		return MintToken(os.Stdout, cfg)
	case "healthcheck":
		cfg, err := parseHealthcheckConfig(args, os.Getenv)
		if err != nil {
			return err
		}
		return Healthcheck(ctx, cfg)
	case "version", "--version", "-version":
		fmt.Println("runhub", version)
		return nil
	default:
		return fmt.Errorf("unknown command %q (want serve, runner, token, healthcheck or version)", cmd)
	}
}
