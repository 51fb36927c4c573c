package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/runhub/runhub/adapter/internal/drivertest"
	"github.com/runhub/runhub/protocol"
)

// answerOK streams a short answer.
func answerOK(w http.ResponseWriter, _ *http.Request) {
	streamHeaders(w)
	send(w, roleChunk, content("Seen."), finishChunk, usageChunk, doneLine)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// messagesOf returns the messages of a request body, each as raw JSON.
func messagesOf(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body %s: %v", body, err)
	}
	return req.Messages
}

func sameJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w bytes.Buffer
	if err := json.Compact(&g, got); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Compact(&w, []byte(want)); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if g.String() != w.String() {
		t.Errorf("%s\n got %s\nwant %s", what, g.String(), w.String())
	}
}

// A start's attachments reach the upstream as content parts of the user
// message: the text, then an image_url part per PNG/JPEG/GIF/WebP image
// (http(s) or data: URL) and a text part per other file — naming it, with
// its URL, or with the decoded (and redacted) text of a text data: URL.
// The session's next run sends that turn again with its parts, and its
// own message without attachments as a plain string.
func TestAttachments_ContentParts(t *testing.T) {
	f := newFake(t, answerOK)
	h := setup(t, f, nil)
	pngData := "data:image/png;base64," + b64("\x89PNG fake")
	atts := []protocol.Attachment{
		{Name: "cat.png", MediaType: "image/png", URL: "https://files.example/cat.png", Size: 2048},
		{Name: "dog.jpg", URL: pngData},
		{Name: "notes.txt", MediaType: "text/plain", URL: "data:text/plain;base64," + b64("line one\napi_key=abcd1234efgh5678"), Size: 38},
		{Name: "report.pdf", MediaType: "application/pdf", URL: "https://files.example/report.pdf", Size: 99},
		{Name: "logo.svg", MediaType: "image/svg+xml", URL: "https://files.example/logo.svg"},
		{Name: "blob.bin", MediaType: "application/octet-stream", URL: "data:application/octet-stream;base64," + b64("\x00\x01")},
		{Name: "log.txt"},
	}
	rid := h.Start(protocol.StartRunRequest{Message: "What are these?", Profile: "fake", Attachments: atts}).RunID
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)

	parts := `[{"type":"text","text":"What are these?"},
		{"type":"image_url","image_url":{"url":"https://files.example/cat.png"}},
		{"type":"image_url","image_url":{"url":"` + pngData + `"}},
		{"type":"text","text":"Attached file \"notes.txt\" (text/plain, 38 bytes):\nline one\napi_key=[REDACTED]"},
		{"type":"text","text":"Attached file \"report.pdf\" (application/pdf, 99 bytes): https://files.example/report.pdf"},
		{"type":"text","text":"Attached file \"logo.svg\" (image/svg+xml): https://files.example/logo.svg"},
		{"type":"text","text":"Attached file \"blob.bin\" (application/octet-stream) (its content, a data: URL, is not sent)"},
		{"type":"text","text":"Attached file \"log.txt\" (no URL: its content is not available)"}]`
	f.mu.Lock()
	body := f.bodies[0]
	f.mu.Unlock()
	msgs := messagesOf(t, body)
	if len(msgs) != 2 {
		t.Fatalf("messages %s", body)
	}
	sameJSON(t, "system message", msgs[0], `{"role":"system","content":"Be brief."}`)
	sameJSON(t, "user message with attachments", msgs[1], `{"role":"user","content":`+parts+`}`)

	rid2 := h.Start(protocol.StartRunRequest{SessionID: ev[0].SessionID, Message: "And the second?", Profile: "fake"}).RunID
	drivertest.Terminal(t, h.Events(rid2, 10*time.Second), protocol.EventDone)
	f.mu.Lock()
	body = f.bodies[1]
	f.mu.Unlock()
	msgs = messagesOf(t, body)
	if len(msgs) != 4 {
		t.Fatalf("second run's messages %s", body)
	}
	sameJSON(t, "the earlier turn, sent again", msgs[1], `{"role":"user","content":`+parts+`}`)
	sameJSON(t, "the earlier answer", msgs[2], `{"role":"assistant","content":"Seen."}`)
	sameJSON(t, "the new message", msgs[3], `{"role":"user","content":"And the second?"}`)
}

// Without attachments the request is byte for byte what it was before
// attachments reached this driver: every content a plain string.
func TestAttachments_NoneKeepsPlainContent(t *testing.T) {
	f := newFake(t, answerOK)
	h := setup(t, f, nil)
	rid := start(h, "", "hi")
	ev := h.Events(rid, 10*time.Second)
	drivertest.Terminal(t, ev, protocol.EventDone)
	rid2 := start(h, ev[0].SessionID, "again")
	drivertest.Terminal(t, h.Events(rid2, 10*time.Second), protocol.EventDone)
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{
		`{"model":"m-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m-test","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"},{"role":"assistant","content":"Seen."},{"role":"user","content":"again"}],"stream":true,"stream_options":{"include_usage":true}}`,
	}
	for i, w := range want {
		if got := string(f.bodies[i]); got != w {
			t.Errorf("request %d\n got %s\nwant %s", i, got, w)
		}
	}
}

// The image rule: only PNG, JPEG, GIF and WebP go as image parts, only
// from an http(s) URL or an image data: URL; the data: URL's own type
// decides for inline data.
func TestAttachmentPart(t *testing.T) {
	for _, tt := range []struct {
		a     protocol.Attachment
		image bool
	}{
		{protocol.Attachment{MediaType: "image/jpeg", URL: "http://h/x.jpg"}, true},
		{protocol.Attachment{MediaType: "IMAGE/WEBP; q=1", URL: "https://h/x"}, true},
		{protocol.Attachment{MediaType: "image/png", URL: "file:///etc/passwd"}, false},
		{protocol.Attachment{MediaType: "image/png", URL: "ftp://h/x.png"}, false},
		{protocol.Attachment{MediaType: "image/png"}, false},
		{protocol.Attachment{URL: "https://h/x.png"}, false},
		{protocol.Attachment{MediaType: "text/plain", URL: "data:image/gif;base64,R0lG"}, true},
		{protocol.Attachment{MediaType: "image/png", URL: "data:text/plain,hi"}, false},
		{protocol.Attachment{MediaType: "image/bmp", URL: "https://h/x.bmp"}, false},
	} {
		_, image := attachmentPart(tt.a).(ImagePart)
		if image != tt.image {
			t.Errorf("%+v: image part %v, want %v", tt.a, image, tt.image)
		}
	}
	if p := attachmentPart(protocol.Attachment{Name: "a.md", URL: "data:,50%25%20done"}).(TextPart); p.Text != "Attached file \"a.md\":\n50% done" {
		t.Errorf("percent-encoded data: URL: %q", p.Text)
	}
}
