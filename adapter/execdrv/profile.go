package execdrv

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/runhub/runhub/adapter/driver"
	"github.com/runhub/runhub/adapter/profile"
	"github.com/runhub/runhub/protocol"
)

// Kind is the driver kind of command profiles.
const Kind = "exec"

// Registration declares the driver to a profile.Registry. What a run can
// do depends on the command: the JSONL convention carries cancel, approval
// and clarify prompts, steer lines, attachments and the workspace (in the
// start line), reasoning, tool calls and usage (docs/exec-driver.md), so
// the driver
// declares them all, and a profile whose command does less lists its own
// "capabilities". It judges no goal (a profile naming a goal_judge has
// goal).
func Registration() profile.Registration {
	return profile.NewRegistration(Kind, []string{
		protocol.CapCancel, protocol.CapApproval, protocol.CapClarify, protocol.CapSteer, protocol.CapQueue,
		protocol.CapAttachments, protocol.CapWorkspace, protocol.CapReasoning, protocol.CapUsage, protocol.CapTools,
	}, build)
}

// Settings are an exec profile's own settings (docs/profiles.md).
type Settings struct {
	// Command and Args are the program run per run (no shell); Dir is its
	// working directory (default: the hub's).
	Command string   `json:"command"` // required
	Args    []string `json:"args,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	// Env adds variables to the command's environment. InheritEnv names
	// variables passed through from the hub's environment besides
	// InheritedEnv; nothing else of the hub's environment reaches the
	// command.
	Env        map[string]string `json:"env,omitempty"`
	InheritEnv []string          `json:"inherit_env,omitempty"`
	// The key is passed to the command under its api_key_env name.
	profile.Key
	Instructions string           `json:"instructions,omitempty"`
	Timeout      profile.Duration `json:"timeout,omitempty"`
	CancelGrace  profile.Duration `json:"cancel_grace,omitempty"` // after the cancel line, before SIGTERM (default 5s)
	KillGrace    profile.Duration `json:"kill_grace,omitempty"`   // after SIGTERM, before SIGKILL (default 5s)
}

// Validate implements profile.Settings.
func (s *Settings) Validate(profile.Profile) error {
	if strings.TrimSpace(s.Command) == "" {
		return errors.New("command is required for driver exec")
	}
	env := make([]string, 0, len(s.Env))
	for k := range s.Env {
		env = append(env, k)
	}
	slices.Sort(env)
	return errors.Join(s.Key.Validate(), s.Timeout.Check("timeout"), s.CancelGrace.Check("cancel_grace"),
		s.KillGrace.Check("kill_grace"), profile.CheckEnvNames("env", env...),
		profile.CheckEnvNames("inherit_env", s.InheritEnv...))
}

// build makes a profile's driver: the command's environment is
// InheritedEnv and the profile's inherit_env from the hub's environment,
// then the profile's env, then its key under api_key_env.
func build(p profile.Profile, s *Settings, env profile.Env) (driver.Driver, error) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	vars := map[string]string{}
	for _, name := range append(slices.Clone(InheritedEnv), s.InheritEnv...) {
		if v := getenv(name); v != "" {
			vars[name] = v
		}
	}
	for k, v := range s.Env {
		vars[k] = v
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	slices.Sort(names)
	list := make([]string, 0, len(names))
	for _, k := range names {
		list = append(list, k+"="+vars[k])
	}
	return New(Config{Command: s.Command, Args: s.Args, Dir: s.Dir, Env: list, APIKeyEnv: s.APIKeyEnv,
		APIKey: s.APIKey(getenv), Profile: p.Name, Model: p.Model, Instructions: s.Instructions,
		CancelGrace: s.CancelGrace.D(), KillGrace: s.KillGrace.D(), Timeout: s.Timeout.D(),
		ClarifyTimeout: env.ClarifyTimeout, Logger: env.Logger})
}
