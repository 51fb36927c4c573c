package httpapi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/hubtest"
	"github.com/runhub/runhub/protocol"
)

// GET /v1/sessions?limit=N&after=<sid> pages the list, oldest first: the
// pages together are the whole list in order, each says whether more
// follow; a bad limit or an after that is not one of the caller's
// sessions is a 400 naming the field; without either the answer is the
// whole list with no "more", as before.
func TestAPI_SessionListPages(t *testing.T) {
	th := newTestHub(t, hub.Config{})
	var ids []string
	for i := range 25 {
		var s protocol.CreateSessionResult
		if code := hubtest.Do(t, "POST", th.URL+"/v1/sessions", `{"title":"s`+strconv.Itoa(i)+`"}`, nil, &s); code != 201 {
			t.Fatalf("create: %d", code)
		}
		ids = append(ids, s.SessionID)
	}
	var got []string
	after := ""
	for page := 1; ; page++ {
		var l protocol.SessionList
		url := th.URL + "/v1/sessions?limit=10"
		if after != "" {
			url += "&after=" + after
		}
		if code := hubtest.Do(t, "GET", url, "", nil, &l); code != 200 || l.More == nil {
			t.Fatalf("page %d: %d, more %v", page, code, l.More)
		}
		if want := min(10, 25-len(got)); len(l.Sessions) != want || *l.More != (len(got)+want < 25) {
			t.Fatalf("page %d: %d sessions, more %v; want %d", page, len(l.Sessions), *l.More, want)
		}
		for _, s := range l.Sessions {
			got = append(got, s.SessionID)
		}
		if !*l.More {
			break
		}
		after = got[len(got)-1]
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("the pages list %v, want %v", got, ids)
	}
	var one protocol.SessionList
	if hubtest.Do(t, "GET", th.URL+"/v1/sessions?after="+ids[23], "", nil, &one); len(one.Sessions) != 1 || one.Sessions[0].SessionID != ids[24] || *one.More {
		t.Fatalf("after the last but one (default limit): %+v", one)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=s_nobody", "after=" + ids[0] + "&limit=-1"} {
		code, body := hubtest.RawDo(t, "GET", th.URL+"/v1/sessions?"+q, "", nil)
		field := strings.SplitN(strings.SplitN(q, "=", 2)[0], "&", 2)[0]
		if strings.Contains(q, "limit=-1") {
			field = "limit"
		}
		if code != 400 || !strings.Contains(body, `"field":"`+field+`"`) {
			t.Errorf("?%s: %d %s, want 400 naming %s", q, code, body, field)
		}
	}
	if code, body := hubtest.RawDo(t, "GET", th.URL+"/v1/sessions", "", nil); code != 200 || strings.Contains(body, `"more"`) || strings.Count(body, `"session_id"`) != 25 {
		t.Fatalf("the whole list: %d, %d sessions, more in it: %v", code, strings.Count(body, `"session_id"`), strings.Contains(body, `"more"`))
	}
}
