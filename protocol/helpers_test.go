package protocol_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runhub/runhub/protocol"
)

// wantError asserts that err is a *protocol.Error with code and, when field
// is not empty, that it names field both in Field and in its message.
func wantError(t *testing.T, err error, code protocol.Code, field string) *protocol.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s (field %q)", code, field)
	}
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %v, want a *protocol.Error", err, err)
	}
	if pe.Code != code {
		t.Errorf("code = %q, want %q (error: %v)", pe.Code, code, err)
	}
	if field != "" {
		if pe.Field != field {
			t.Errorf("field = %q, want %q (error: %v)", pe.Field, field, err)
		}
		if !strings.Contains(pe.Message, field) {
			t.Errorf("message %q does not name the field %q", pe.Message, field)
		}
	}
	if pe.Message == "" {
		t.Errorf("error %#v has no message", pe)
	}
	return pe
}

// knownCodes is the stable code table of protocol v1.
var knownCodes = map[protocol.Code]bool{
	protocol.CodeBadRequest: true, protocol.CodeTooLarge: true, protocol.CodeBadCursor: true,
	protocol.CodeNotFound: true, protocol.CodeConflict: true, protocol.CodeUnauthorized: true,
	protocol.CodeForbidden: true, protocol.CodeRateLimited: true, protocol.CodeLimitExceeded: true,
	protocol.CodeUnsupported: true, protocol.CodeInternal: true, protocol.CodeUnavailable: true,
	protocol.CodeProtocol: true, protocol.CodeTerminal: true, protocol.CodeNotActive: true,
	protocol.CodeSlowConsumer: true, protocol.CodeInvalidPayload: true, protocol.CodeMethodNotAllowed: true,
}

var errPlain = errors.New("plain")

func fmtErr(err error) error { return fmt.Errorf("context: %w", err) }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
