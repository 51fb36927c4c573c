package protocol

import "slices"

// The capabilities a profile's driver may have (GET /v1/profiles lists
// each profile's). A control the driver of its run or session lacks is
// answered ControlResult status unsupported, and a session's
// active_controls never offer it.
const (
	CapCancel      = "cancel"      // a running run can be cancelled
	CapApproval    = "approval"    // the runtime asks approvals (control approve)
	CapClarify     = "clarify"     // the runtime asks questions (control clarify)
	CapSteer       = "steer"       // guidance reaches a running run (control queue, mode steer)
	CapQueue       = "queue"       // messages queue for the session's next runs (control queue)
	CapGoal        = "goal"        // the runtime evaluates a standing goal (control goal)
	CapAttachments = "attachments" // a start's attachments reach the runtime
	CapWorkspace   = "workspace"   // a start's workspace reaches the runtime
	CapReasoning   = "reasoning"   // runs may stream reasoning.delta
	CapUsage       = "usage"       // runs report token usage
	CapTools       = "tools"       // runs may show tool calls
)

// Capabilities lists every capability, in the order answers list them.
func Capabilities() []string {
	return []string{CapCancel, CapApproval, CapClarify, CapSteer, CapQueue, CapGoal,
		CapAttachments, CapWorkspace, CapReasoning, CapUsage, CapTools}
}

// KnownCapability reports whether name is a capability of protocol v1.
func KnownCapability(name string) bool { return slices.Contains(Capabilities(), name) }

// SortCapabilities returns caps in the order of Capabilities, without
// duplicates.
func SortCapabilities(caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range Capabilities() {
		if slices.Contains(caps, c) {
			out = append(out, c)
		}
	}
	return out
}

// OpCapability is the capability a control op needs as active_controls
// names it: start needs none (""); queue needs queue (its steer mode
// needs steer, Control.Capability).
func OpCapability(op string) string {
	switch op {
	case OpCancel:
		return CapCancel
	case OpApprove:
		return CapApproval
	case OpClarify:
		return CapClarify
	case OpQueue:
		return CapQueue
	case OpGoal:
		return CapGoal
	}
	return ""
}

// Capability is the capability c needs of the driver of its run or
// session ("" for none).
func (c *Control) Capability() string {
	if c.Op == OpQueue && c.Mode == ModeSteer {
		return CapSteer
	}
	return OpCapability(c.Op)
}

// OfferedControls is controls (op names, as active_controls lists them)
// without those whose capability caps lacks.
func OfferedControls(controls, caps []string) []string {
	out := make([]string, 0, len(controls))
	for _, op := range controls {
		if need := OpCapability(op); need == "" || slices.Contains(caps, need) {
			out = append(out, op)
		}
	}
	return out
}
