package hermeswebui

import (
	"encoding/json"
	"net/url"
	"path"

	"github.com/runhub/runhub/protocol"
)

// attachments converts WebUI's attachments: a file name, or
// {name, path, mime, size, is_image}. WebUI's path is where it stored the
// upload on its own machine (an absolute path): it is kept as the
// attachment's file:// URL, which a runtime that takes attachments gets as
// the client's word (docs/profiles.md#attachments). A relative path is no
// file:// URL and is left out, as before.
func attachments(in []json.RawMessage) []protocol.Attachment {
	var out []protocol.Attachment
	for _, raw := range in {
		var name string
		if json.Unmarshal(raw, &name) == nil {
			out = append(out, protocol.Attachment{Name: name})
			continue
		}
		var a struct {
			Name string `json:"name"`
			Path string `json:"path"`
			Mime string `json:"mime"`
			Size int64  `json:"size"`
		}
		if json.Unmarshal(raw, &a) == nil {
			out = append(out, protocol.Attachment{Name: a.Name, MediaType: a.Mime, Size: a.Size, URL: fileURL(a.Path)})
		}
	}
	return out
}

// fileURL is the file:// URL of an absolute path ("" for any other).
func fileURL(p string) string {
	if !path.IsAbs(p) {
		return ""
	}
	return (&url.URL{Scheme: "file", Path: path.Clean(p)}).String()
}
