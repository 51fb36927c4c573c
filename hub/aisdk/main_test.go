package aisdk_test

import (
	"testing"

	"github.com/runhub/runhub/hub/aisdk"
	"github.com/runhub/runhub/hub/httpapi"
	"github.com/runhub/runhub/hub/hubtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestHub is the core in memory with this edge (and the HTTP API its
// tests set runs up with), on loopback.
var newTestHub = hubtest.Server(httpapi.New(nil), aisdk.New())
