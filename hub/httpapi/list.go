package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/runhub/runhub/protocol"
)

// listFlush is how much of a session list is encoded before it is written.
const listFlush = 64 << 10

// writeSessionList answers list with the bytes c.JSON would send
// ({"sessions":[…]} and a newline), encoding one status at a time and
// writing every listFlush bytes: c.JSON builds the whole answer in one
// growing buffer first, and at 100,000 sessions that is 42 MB copied and
// cleared over and over. ?pretty is left to c.JSON.
func writeSessionList(c echo.Context, list []protocol.SessionStatus) error {
	if _, pretty := c.QueryParams()["pretty"]; pretty || list == nil {
		return c.JSON(http.StatusOK, protocol.SessionList{Sessions: list})
	}
	w := c.Response()
	buf := append(make([]byte, 0, listFlush+4<<10), `{"sessions":[`...)
	for i := range list {
		b, err := json.Marshal(&list[i])
		if err != nil {
			if !w.Committed {
				return err // nothing sent yet: the usual error answer
			}
			panic(http.ErrAbortHandler) // a cut answer, not a wrong one
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, b...)
		if len(buf) >= listFlush {
			if err := writeList(w, buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return writeList(w, append(buf, "]}\n"...))
}

func writeList(w *echo.Response, b []byte) error {
	if !w.Committed {
		w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		w.WriteHeader(http.StatusOK)
	}
	_, err := w.Write(b)
	return err
}
