package main

import (
	"os"
	"path/filepath"
	"testing"
)

func writeSimProfiles(t *testing.T, file, name string) {
	t.Helper()
	body := `{"default": "` + name + `", "profiles": {"` + name + `": {"driver": "sim"}}}`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// While the hub is gone every control that changes something is disabled
// with the reason (rename, delete, + New included), the pane's header says
// offline (not "replaying"), the reconnect delay never passes 5 s, and
// "Retry now" and the browser's online event reconnect at once; after the
// hub comes back with another profiles file, the picker lists the new
// profiles without a reload.
func TestBrowser_OfflineRetryAndRefetch(t *testing.T) {
	profiles := filepath.Join(t.TempDir(), "profiles.json")
	writeSimProfiles(t, profiles, "alpha")
	env := []string{"RUNHUB_PROFILES=" + profiles}
	w := openWorkbench(t, env...)
	base := w.hub.URL()
	jsProfiles := `[...document.querySelectorAll(` + jsq(tid("start-profile")+" option") + `)].map((o) => o.value).join(",")`
	waitJS[bool](w, "the profile alpha", jsProfiles+`.split(",").includes("alpha")`, stateTimeout)
	sid := httpSession(t, base, "offline")
	w.focusByHash(sid)
	evalJS[bool](w, "record reconnect delays", `(window.__delays = [], window.runhub.on("state", (s) => s.state === "reconnecting" && s.delay_ms && window.__delays.push(s.delay_ms)), true)`)

	w.hub.kill()
	waitJS[bool](w, "the offline banner", `!document.querySelector(`+jsq(tid("offline-banner"))+`).hidden`, stateTimeout)
	type control struct {
		Disabled bool
		Title    string
	}
	for _, id := range []string{"rename-session", "delete-session", "new-session", "start-submit", "queue-submit"} {
		c := evalJS[control](w, id, `(() => { const b = document.querySelector(`+jsq(tid(id))+`); return { Disabled: b.disabled, Title: b.title }; })()`)
		if !c.Disabled || c.Title == "" {
			w.fatal("%s while offline: %+v, want disabled with a reason", id, c)
		}
	}
	if !evalJS[bool](w, "header", `!document.querySelector(`+jsq(tid("pane-offline"))+`).hidden && document.querySelector(`+jsq(tid("replaying"))+`).hidden`) {
		w.fatal("the pane header does not say offline, or still says replaying")
	}

	// Let the backoff grow: 250 ms doubling, capped at 5 s.
	delays := waitJS[[]float64](w, "six reconnect attempts", `window.__delays.length >= 6 && window.__delays`, 60*1e9)
	for _, d := range delays {
		if d > 5000 {
			w.fatal("a reconnect delay of %v ms; the cap is 5 s (delays %v)", d, delays)
		}
	}

	// Retry now: a new attempt starts at once, not when the timer fires.
	waitJS[bool](w, "waiting to reconnect", `window.runhub.state === "reconnecting" && !!window.runhub._retryTimer`, stateTimeout)
	if st := evalJS[string](w, "retry now", `(document.querySelector(`+jsq(tid("retry-now"))+`).click(), window.runhub.state)`); st != "connecting" {
		w.fatal("after Retry now the client is %q, want connecting at once", st)
	}
	waitJS[bool](w, "waiting to reconnect again", `window.runhub.state === "reconnecting" && !!window.runhub._retryTimer`, stateTimeout)
	if st := evalJS[string](w, "online", `(window.dispatchEvent(new Event("online")), window.runhub.state)`); st != "connecting" {
		w.fatal("after the online event the client is %q, want connecting at once", st)
	}

	// Back, with other profiles.
	writeSimProfiles(t, profiles, "beta")
	w.hub = startHubAt(t, w.hub.addr, w.hub.data, env...)
	evalJS[bool](w, "retry now", `(document.querySelector(`+jsq(tid("retry-now"))+`).click(), true)`)
	w.waitConnected()
	waitJS[bool](w, "the profile beta without a reload", jsProfiles+`.split(",").includes("beta") && !`+jsProfiles+`.split(",").includes("alpha")`, stateTimeout)
	waitJS[bool](w, "controls enabled again", `!document.querySelector(`+jsq(tid("rename-session"))+`).disabled && !document.querySelector(`+jsq(tid("new-session"))+`).disabled && document.querySelector(`+jsq(tid("pane-offline"))+`).hidden`, stateTimeout)
	w.noExceptions()
}
