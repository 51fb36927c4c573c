package openai

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// Message is one chat message sent upstream: a turn of the conversation
// (role system, user, assistant or tool). Content is a string, or for a
// user message with attachments its content parts (TextPart, ImagePart),
// or null for an assistant message of tool calls only. ToolCalls and
// ToolCallID are an earlier run's tool calls and results (history.go),
// left out of every other message.
type Message struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// TextPart is a content part of text.
type TextPart struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

// ImagePart is a content part of an image the upstream fetches (an http or
// https URL) or reads inline (a data: URL).
type ImagePart struct {
	Type     string   `json:"type"` // "image_url"
	ImageURL ImageURL `json:"image_url"`
}

// ImageURL is an ImagePart's image.
type ImageURL struct {
	URL string `json:"url"`
}

// imageTypes are the image media types the chat completions API takes as
// image input; any other image goes as a text part.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// userMessage is a user turn: its text as a plain string when it has no
// attachments (the request is then what it was before attachments), else
// content parts: the text first, then one part per attachment, in order.
func userMessage(text string, atts []protocol.Attachment) Message {
	if len(atts) == 0 {
		return Message{Role: "user", Content: text}
	}
	parts := make([]any, 0, len(atts)+1)
	parts = append(parts, TextPart{Type: "text", Text: text})
	for _, a := range atts {
		parts = append(parts, attachmentPart(a))
	}
	return Message{Role: "user", Content: parts}
}

// attachmentPart is one attachment as a content part: an image part for a
// PNG, JPEG, GIF or WebP image with an http(s) URL or an image data: URL,
// else a text part that names the file (name, media type, size) and gives
// its URL — or, for a data: URL of text (text/*, JSON, XML, YAML, …), its
// content, decoded and redacted like a message. Nothing is ever fetched
// or read here: a URL is passed on as the start gave it.
func attachmentPart(a protocol.Attachment) any {
	u := strings.TrimSpace(a.URL)
	du, isData := parseDataURL(u)
	mt := mediaType(a.MediaType)
	switch {
	case isData && imageTypes[du.mediaType]:
		return ImagePart{Type: "image_url", ImageURL: ImageURL{URL: u}}
	case !isData && imageTypes[mt] && isHTTP(u):
		return ImagePart{Type: "image_url", ImageURL: ImageURL{URL: u}}
	}
	head := describe(a)
	switch {
	case isData && du.err == nil && (textual(du.mediaType) || textual(mt)) && utf8.Valid(du.data):
		return TextPart{Type: "text", Text: head + ":\n" + journal.RedactString(string(du.data))}
	case isData:
		return TextPart{Type: "text", Text: head + " (its content, a data: URL, is not sent)"}
	case u != "":
		return TextPart{Type: "text", Text: head + ": " + u}
	}
	return TextPart{Type: "text", Text: head + " (no URL: its content is not available)"}
}

// describe names an attachment: `Attached file "name" (media type, N
// bytes)`, leaving out what the start did not give.
func describe(a protocol.Attachment) string {
	var meta []string
	if a.MediaType != "" {
		meta = append(meta, a.MediaType)
	}
	if a.Size > 0 {
		meta = append(meta, fmt.Sprintf("%d bytes", a.Size))
	}
	s := fmt.Sprintf("Attached file %q", cmp.Or(a.Name, "unnamed"))
	if len(meta) > 0 {
		s += " (" + strings.Join(meta, ", ") + ")"
	}
	return s
}

// mediaType is a media type without parameters, lower case.
func mediaType(s string) string {
	s, _, _ = strings.Cut(s, ";")
	return strings.ToLower(strings.TrimSpace(s))
}

func isHTTP(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// textual reports whether a media type is text a model reads as such.
func textual(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-sh", "application/sql", "application/x-ndjson":
		return true
	}
	return false
}

// dataURL is a parsed data: URL (RFC 2397).
type dataURL struct {
	mediaType string // without parameters; text/plain when the URL names none
	data      []byte
	err       error // the data did not decode
}

// parseDataURL parses u when it is a data: URL (ok false otherwise).
func parseDataURL(u string) (d dataURL, ok bool) {
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return d, false
	}
	head, payload, found := strings.Cut(u[5:], ",")
	if !found {
		return dataURL{err: fmt.Errorf("no comma")}, true
	}
	params := strings.Split(head, ";")
	d.mediaType = cmp.Or(mediaType(params[0]), "text/plain")
	if strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") && len(params) > 1 {
		d.data, d.err = base64.StdEncoding.DecodeString(payload)
		if d.err != nil {
			d.data, d.err = base64.RawStdEncoding.DecodeString(strings.TrimRight(payload, "="))
		}
		return d, true
	}
	s, err := url.PathUnescape(payload)
	d.data, d.err = []byte(s), err
	return d, true
}
