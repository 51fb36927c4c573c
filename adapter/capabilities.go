package adapter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runhub/runhub/protocol"
)

// Capabilities tells what the runs of a profile, or of a provider (a
// driver kind a start names without a profile), can do: protocol.Cap*
// names. Both empty is a start's default. ok is false for a name it does
// not know: nothing is then refused. adapter/profile's
// Config.Capabilities is one; the executor refuses what a run's driver
// cannot do, and the hub's active_controls never offer it. The slice may
// be shared (the hub asks for every status it encodes): callers read it
// and never change it.
type Capabilities func(profile, provider string) (caps []string, ok bool)

// Capable is the capabilities of one run's profile or provider, resolved.
type Capable struct {
	Profile, Provider string // what the run named (Provider when no profile)
	Caps              []string
	Known             bool // false: every control is let through
}

// Resolve resolves the capabilities of a run of profile, else provider
// (f nil: every control is let through).
func (f Capabilities) Resolve(profile, provider string) Capable {
	c := Capable{Profile: profile, Provider: provider}
	if f != nil {
		c.Caps, c.Known = f(profile, provider)
	}
	return c
}

// Lacks reports whether the run cannot do need ("" needs nothing).
func (c Capable) Lacks(need string) bool {
	return c.Known && need != "" && !slices.Contains(c.Caps, need)
}

// Unsupported answers a control that needs what the run cannot do: status
// unsupported, naming the profile (or provider) and the capability.
func (c Capable) Unsupported(need, runID, sessionID string) protocol.ControlResult {
	who := fmt.Sprintf("profile %q", c.Profile)
	if c.Profile == "" {
		who = fmt.Sprintf("driver %q", c.Provider)
	}
	has := "nothing"
	if len(c.Caps) > 0 {
		has = strings.Join(c.Caps, ", ")
	}
	msg := fmt.Sprintf("%s cannot do %s (its capabilities: %s)", who, need, has)
	if need == protocol.CapGoal {
		msg += ": give it a goal_judge (an openai profile)"
	}
	return Result(protocol.ResultUnsupported, msg, runID, sessionID, "")
}
