package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/runhub/runhub/protocol"
)

// The start form lists the hub's profiles (default preselected), shows the
// sim options only for a sim profile, and a run started with a picked
// profile runs with that profile's driver.
func TestBrowser_ProfilePicker(t *testing.T) {
	upstream, _ := fakeOpenAI(t)
	w := openWorkbench(t, profileEnv(writeProfiles(t, upstream.URL))...)

	options := waitJS[string](w, "the profile picker to list the hub's profiles",
		`[...document.querySelectorAll(`+jsq(tid("start-profile")+" option")+`)].map(o => o.value).join(",")`+
			` === "local,script,sim" ? document.querySelector(`+jsq(tid("start-profile"))+`).value : ""`, stateTimeout)
	if options != "local" {
		w.fatal("preselected profile %q, want the default local", options)
	}
	if !evalJS[bool](w, "sim options hidden?", `document.getElementById("sim-options").hidden`) {
		w.fatal("the sim options show for an openai profile")
	}

	w.do("fill the start form", chromedp.SetValue(chromedp.CSS(tid("start-message")), "hello from the browser"))
	w.setChecked("start-new-session", true)
	w.do("click start-submit", chromedp.Click(chromedp.CSS(tid("start-submit"))))
	rid := waitJS[string](w, "the run in the transcript",
		`document.querySelector(`+jsq(tid("transcript")+" "+tid("run"))+`)?.dataset.runId || ""`, stateTimeout)
	w.checkID("run", rid)
	waitJS[bool](w, "the openai answer to render", jsRunText(rid)+` === "Hi there"`, stateTimeout)
	events := allEvents(t, w.hub.URL(), rid)
	rs, _ := protocol.DecodePayload[protocol.RunStartedPayload](&events[0])
	if rs.Profile != "local" || rs.Provider != "openai" {
		t.Errorf("run.started = %+v", rs)
	}
	if strings.Contains(string(events[0].Payload), "sim") {
		t.Errorf("an openai run carried sim options: %s", events[0].Payload)
	}

	w.do("pick the sim profile", chromedp.SetValue(chromedp.CSS(tid("start-profile")), "sim"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(`+jsq(tid("start-profile"))+`).dispatchEvent(new Event("change"))`))
	if evalJS[bool](w, "sim options hidden?", `document.getElementById("sim-options").hidden`) {
		w.fatal("the sim options are hidden for the sim profile")
	}
	w.noExceptions()
}
