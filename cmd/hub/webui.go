package main

import (
	"fmt"
	"strings"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hermeswebui"
)

// WebUIConfig configures hermes-webui's runner API on `hub serve`
// (docs/hermes-webui.md).
type WebUIConfig struct {
	Base string // RUNHUB_HERMES_WEBUI_BASE, -hermes-webui-base: path of the runner API (default /compat/hermes-webui; "off": not served)
	Keys string // RUNHUB_HERMES_WEBUI_KEYS (environment only): comma-separated subject=key runner keys

	keys map[string]string // key → subject
}

// webui defines the WebUIConfig flags.
func (f *flagSet) webui(c *WebUIConfig) {
	f.str(&c.Base, "hermes-webui-base", "RUNHUB_HERMES_WEBUI_BASE", defaultWebUIBase,
		"path hermes-webui's runner API is served under: HERMES_WEBUI_RUNNER_BASE_URL is the hub's URL plus it (off: not served)")
	c.Keys = f.secretEnv("RUNHUB_HERMES_WEBUI_KEYS",
		"comma-separated subject=key pairs: a WebUI sending key as HERMES_WEBUI_RUNNER_API_KEY acts as subject (environment only: a flag would show in ps)")
}

// check validates the base path and parses the keys.
func (c *WebUIConfig) check() error {
	if c.Base != "off" && (!strings.HasPrefix(c.Base, "/") || strings.TrimRight(c.Base, "/") == "" ||
		strings.ContainsAny(c.Base, ":*?# ") || strings.HasPrefix(c.Base, "/v1")) {
		return fmt.Errorf("hermes-webui base %q: want an absolute path such as /compat/hermes-webui, not / or under /v1 (or off)", c.Base)
	}
	c.keys = map[string]string{}
	for _, pair := range strings.Split(c.Keys, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		subject, key, ok := strings.Cut(pair, "=")
		subject, key = strings.TrimSpace(subject), strings.TrimSpace(key)
		if !ok || subject == "" || len(key) < 16 {
			return fmt.Errorf("RUNHUB_HERMES_WEBUI_KEYS: want subject=key pairs with keys of at least 16 characters")
		}
		if _, dup := c.keys[key]; dup {
			return fmt.Errorf("RUNHUB_HERMES_WEBUI_KEYS: one key is given to two subjects")
		}
		c.keys[key] = subject
	}
	return nil
}

// defaultWebUIBase is where the runner API is served by default.
const defaultWebUIBase = "/compat/hermes-webui"

// webUIEdge is hermes-webui's runner API (unless its base is off: nil;
// an unset base is the default, never the root or /v1).
func webUIEdge(c WebUIConfig, rt *procRuntime) hub.Edge {
	if c.Base == "off" {
		return nil
	}
	if c.Base == "" {
		c.Base = defaultWebUIBase
	}
	return hermeswebui.Runner(hermeswebui.RunnerOptions{Base: c.Base, Keys: c.keys, Profiles: rt.profiles.Public()})
}
