package interop_test

import (
	"testing"

	"github.com/runhub/runhub/hub/agui"
	"github.com/runhub/runhub/hub/aisdk"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestHub is the core in memory with the chat-style edges (AG-UI, the
// AI SDK) and the HTTP API, on loopback.
var newTestHub = hubtest.Server(httpapi.New(nil), agui.New(), aisdk.New())
