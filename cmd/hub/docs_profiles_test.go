package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// profilesMark marks a snippet of a walk-through that starts the hub with
// the profiles file of the document's last JSON block above it holding
// "profiles" (RUNHUB_PROFILES=./profiles.json make run).
const profilesMark = "run with the profiles above: want"

var (
	profilesFence = regexp.MustCompile("(?s)```json\n([^`]*\"profiles\"[^`]*)```")
	// modelServers are the servers the README's profiles name: an
	// OpenAI-compatible one (llama-server --port 8081) and a Hermes
	// gateway (:8642).
	modelServers = regexp.MustCompile(`\b127\.0\.0\.1:(8081|8642)\b`)
)

// startProfilesHub starts a hub with the last profiles file of doc (the
// text above a snippet), the model servers it names played by the fakes
// of the driver tests (fakeOpenAIKey without a key, as a local server;
// fakeHermes without an approval, so that the run ends): the test
// rewrites only their addresses, 127.0.0.1:8081 and :8642, to the fakes',
// and gives HERMES_API_SERVER_KEY the fake gateway's key.
func startProfilesHub(t *testing.T, doc string) *hubProcess {
	t.Helper()
	all := profilesFence.FindAllStringSubmatch(doc, -1)
	if len(all) == 0 {
		t.Fatalf("no profiles file (a json block holding \"profiles\") above the snippet")
	}
	openai, _ := fakeOpenAIKey(t, "")
	hermes, _, _ := fakeHermes(t, false)
	fakes := map[string]string{"8081": openai.Listener.Addr().String(), "8642": hermes.Listener.Addr().String()}
	profiles := modelServers.ReplaceAllStringFunc(all[len(all)-1][1], func(s string) string {
		return fakes[s[len("127.0.0.1:"):]]
	})
	file := filepath.Join(t.TempDir(), "profiles.json")
	if err := os.WriteFile(file, []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	return startHub(t, t.TempDir(), "RUNHUB_PROFILES="+file, "HERMES_API_SERVER_KEY="+hermesKey)
}
