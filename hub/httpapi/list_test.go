package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// The streamed list is byte for byte what c.JSON sends (HTML escaping,
// the final newline, the headers), across several flushes, for an empty
// and a nil list too.
func TestWriteSessionList_AsCJSON(t *testing.T) {
	e := echo.New()
	answer := func(path string, write func(echo.Context) error) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		if err := write(e.NewContext(httptest.NewRequest(http.MethodGet, path, nil), rec)); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	big := make([]protocol.SessionStatus, 2000)
	for i := range big {
		big[i] = protocol.SessionStatus{SessionID: "s_" + strconv.Itoa(i), Title: "<b>one & " + strconv.Itoa(i) + "</b> \u2028",
			RunID: "r_" + strconv.Itoa(i), Status: protocol.StatusCompleted, LastSeq: uint64(i), Terminal: true,
			ActiveControls: []string{"start"}, UpdatedAt: float64(i) + 0.5}
	}
	for name, list := range map[string][]protocol.SessionStatus{"2,000 sessions": big, "one": big[:1], "empty": {}, "nil": nil} {
		got := answer("/v1/sessions", func(c echo.Context) error { return writeSessionList(c, list) })
		want := answer("/v1/sessions", func(c echo.Context) error {
			return c.JSON(http.StatusOK, protocol.SessionList{Sessions: list})
		})
		if got.Body.String() != want.Body.String() {
			t.Fatalf("%s: the streamed list differs from c.JSON's (%d bytes, want %d)", name, got.Body.Len(), want.Body.Len())
		}
		if got.Code != 200 || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Fatalf("%s: %d %q, want 200 %q", name, got.Code, got.Header().Get("Content-Type"), want.Header().Get("Content-Type"))
		}
	}
	if len(answer("/v1/sessions", func(c echo.Context) error { return writeSessionList(c, big) }).Body.String()) < 4*listFlush {
		t.Fatal("the test list does not span several flushes")
	}
}
