package execdrv

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sync"

	"github.com/runhub/runhub/protocol"
)

// lineHello is the stdout line in which the command states what it can do
// (docs/exec-driver.md): {"type":"hello","payload":{"capabilities":[…]}}
// (capabilities at the top level of the line are read too). It is no
// event: nothing of it is journaled.
const lineHello protocol.EventType = "hello"

// helloCaps is what the command's last hello said it can do. Before any
// hello (a profile's first run, a command that never says), nothing is
// known and the profile's declared capabilities stand; after one, the
// profile's capabilities are narrowed to the hello's (profile.Config
// narrows a driver.CapabilityReporter's profile), for the controls of the
// run under way and for every later answer.
type helloCaps struct {
	mu    sync.Mutex
	caps  []string
	known bool
}

// set records the capabilities of a hello line; unknown names are dropped
// (logged), and a hello without a capabilities list changes nothing.
func (h *helloCaps) set(log *slog.Logger, raw, payload json.RawMessage) {
	var v struct {
		Capabilities *[]string `json:"capabilities"`
	}
	json.Unmarshal(payload, &v)
	if v.Capabilities == nil {
		json.Unmarshal(raw, &v)
	}
	if v.Capabilities == nil {
		log.Debug("exec: hello line without capabilities")
		return
	}
	caps := make([]string, 0, len(*v.Capabilities))
	for _, c := range *v.Capabilities {
		if !protocol.KnownCapability(c) {
			log.Warn("exec: hello names an unknown capability", "capability", protocol.Truncate(c, 40))
			continue
		}
		if !slices.Contains(caps, c) {
			caps = append(caps, c)
		}
	}
	h.mu.Lock()
	h.caps, h.known = protocol.SortCapabilities(caps), true
	h.mu.Unlock()
}

// RuntimeCapabilities implements driver.CapabilityReporter: what the
// command's last hello said (known false before any).
func (d *Driver) RuntimeCapabilities() ([]string, bool) {
	d.hello.mu.Lock()
	defer d.hello.mu.Unlock()
	return slices.Clone(d.hello.caps), d.hello.known
}
