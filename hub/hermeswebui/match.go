package hermeswebui

import (
	"math"
	"regexp"
	"strings"
)

// Which turn of the transcript a run journal belongs to. The sidecar's
// messages carry no stream id, so a journal is matched to a turn:
//
//  1. by its stream id, where the turn journal has the run's submitted
//     row: the turn whose user message is that prompt, the nearest to the
//     row's time when the same prompt was sent more than once;
//  2. else by time: the turn whose user message was sent nearest before
//     the journal's first row (one sent a little after it counts, for
//     clocks, at a penalty), and never a turn when a later one had begun
//     by then.
//
// A turn takes one journal at most; a journal left without a turn is
// still imported, on its own (a turn that was saved nowhere else).

// timeSlack is how far after a journal's first row a user message may
// have been stamped and still be its turn's (clocks, a rounded time).
const timeSlack = 2.0

// matchJournals returns, for each journal of js, the index of its turn
// in turns, or -1.
func matchJournals(turns []turn, js []RunJournal, subs map[string]Submission) []int {
	match := make([]int, len(js))
	taken := make([]bool, len(turns))
	for k := range match {
		match[k] = -1
	}
	for k := range js {
		sub, ok := subs[js[k].RunID]
		if !ok || sub.Prompt == "" {
			continue
		}
		at := sub.At
		if at == 0 {
			at = js[k].Start()
		}
		want := samePrompt(sub.Prompt)
		best, bestD := -1, math.Inf(1)
		for i, t := range turns {
			if taken[i] || t.user == nil || samePrompt(t.user.Text()) != want {
				continue
			}
			if d := math.Abs(t.at - at); d < bestD {
				best, bestD = i, d
			}
		}
		if best >= 0 {
			match[k], taken[best] = best, true
		}
	}
	for k := range js {
		if match[k] >= 0 {
			continue
		}
		if i := nearestTurn(turns, taken, js[k].Start()); i >= 0 {
			match[k], taken[i] = i, true
		}
	}
	return match
}

// nearestTurn is the turn not taken whose user message was sent nearest
// before start (up to timeSlack after it, at three times the cost), of
// those no later turn had followed by start; -1 when none.
func nearestTurn(turns []turn, taken []bool, start float64) int {
	best, bestCost := -1, math.Inf(1)
	for i, t := range turns {
		if taken[i] || t.at <= 0 || t.at > start+timeSlack || laterBegun(turns, i, start) {
			continue
		}
		cost := start - t.at
		if cost < 0 {
			cost = -3 * cost
		}
		if cost < bestCost {
			best, bestCost = i, cost
		}
	}
	return best
}

// laterBegun reports whether a turn after i had begun by start.
func laterBegun(turns []turn, i int, start float64) bool {
	for k := i + 1; k < len(turns); k++ {
		if turns[k].at > 0 {
			return turns[k].at <= start
		}
	}
	return false
}

// workspacePrefix is the prefix WebUI puts before a prompt it sends the
// model ("[Workspace::v1: /abs/path]"); the sidecar keeps the bare text.
var workspacePrefix = regexp.MustCompile(`^\[Workspace::v\d+: [^\]]*\]\s*`)

// barePrompt is a submitted prompt as the user wrote it: without the
// workspace prefix.
func barePrompt(s string) string { return workspacePrefix.ReplaceAllString(s, "") }

// samePrompt is a prompt as compared: without the workspace prefix and
// the spaces around it.
func samePrompt(s string) string {
	return strings.TrimSpace(workspacePrefix.ReplaceAllString(strings.TrimSpace(s), ""))
}
