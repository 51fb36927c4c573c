package durable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/durable"
	"github.com/runhub/runhub/internal/npmtest"
	"github.com/runhub/runhub/internal/redistest"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/journal/redis"
)

// vitestReport is the part of vitest's JSON report the test reads.
type vitestReport struct {
	NumTotalTests   int `json:"numTotalTests"`
	NumPassedTests  int `json:"numPassedTests"`
	NumFailedTests  int `json:"numFailedTests"`
	NumPendingTests int `json:"numPendingTests"`
	NumTodoTests    int `json:"numTodoTests"`
	TestResults     []struct {
		Message          string `json:"message"`
		AssertionResults []struct {
			FullName        string   `json:"fullName"`
			Status          string   `json:"status"`
			FailureMessages []string `json:"failureMessages"`
		} `json:"assertionResults"`
	} `json:"testResults"`
}

// conformanceSuite installs the pinned suite once for every backend.
func conformanceSuite(t *testing.T) (node, dir string) {
	return npmtest.Install(t, "the Durable Streams conformance suite", "../../web/durable-test",
		"package.json", "package-lock.json", "conformance.test.mjs", "vitest.config.mjs")
}

// runSuite runs the whole suite against baseURL and fails on any test
// that did not pass (a skipped one included).
func runSuite(t *testing.T, node, dir, baseURL string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "node_modules/vitest/vitest.mjs", "run",
		"--reporter=dot", "--reporter=json", "--outputFile.json="+out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DS_BASE_URL="+baseURL, fmt.Sprintf("DS_LONG_POLL_MS=%d", shortPoll.Milliseconds()), "NO_COLOR=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	runErr := cmd.Run()
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("vitest wrote no report (%v): %v\n%s", runErr, err, tail(stderr.String(), 4000))
	}
	var rep vitestReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("vitest's report: %v", err)
	}
	var failed []string
	subs := 0
	for _, f := range rep.TestResults {
		if f.Message != "" {
			failed = append(failed, "file: "+f.Message)
		}
		for _, a := range f.AssertionResults {
			if strings.HasPrefix(a.FullName, subscriptionTests) && a.Status == "passed" {
				subs++
			}
			if a.Status != "passed" {
				msg := ""
				if len(a.FailureMessages) > 0 {
					msg = tail(a.FailureMessages[0], 600)
				}
				failed = append(failed, fmt.Sprintf("%s [%s] %s", a.FullName, a.Status, msg))
			}
		}
	}
	t.Logf("conformance suite: %d tests, %d passed (%d of them the subscription extension), %d failed, %d skipped",
		rep.NumTotalTests, rep.NumPassedTests, subs, rep.NumFailedTests, rep.NumPendingTests+rep.NumTodoTests)
	if len(failed) > 0 || rep.NumPassedTests != rep.NumTotalTests || rep.NumPassedTests < minConformanceTests || subs < minSubscriptionTests {
		t.Fatalf("%d of %d conformance tests did not pass:\n%s", rep.NumTotalTests-rep.NumPassedTests, rep.NumTotalTests,
			strings.Join(failed, "\n"))
	}
}

// subscriptionTests prefixes the suite's tests of its opt-in extension
// (webhook and pull-wake subscriptions, run with runConformanceTests'
// subscriptions option, which conformance.test.mjs sets).
const subscriptionTests = "Reserved subscription APIs "

// minConformanceTests is how many tests suite 0.3.6 has with its
// subscription extension (332 without), minSubscriptionTests how many of
// them are the extension's: a run that passes fewer ran less than the
// whole suite.
const (
	minConformanceTests  = 338
	minSubscriptionTests = 6
)

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// edgeOptions are the edge's settings under the suite: its long-poll
// timeout as the suite is told, the reaper quick enough for its TTL tests.
func edgeOptions() durable.Options {
	return durable.Options{LongPollTimeout: shortPoll, ReapInterval: 250 * time.Millisecond}
}

// The official conformance suite passes whole against the edge over the
// embedded journal and over Redis.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole official suite twice, over a minute (make test runs it)")
	}
	node, dir := conformanceSuite(t)
	t.Run("bolt", func(t *testing.T) {
		store, err := bolt.Open(filepath.Join(t.TempDir(), "journal.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), edgeOptions(), hub.Config{})
		runSuite(t, node, dir, th.URL)
	})
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t, redistest.Options{})
		store, err := redis.Open(context.Background(), redis.Options{URL: rs.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		th, _ := serve(t, store, store.Streams(journal.StreamLimits{}), edgeOptions(), hub.Config{})
		runSuite(t, node, dir, th.URL)
	})
}
