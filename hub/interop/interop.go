// Package interop is what the edges of the chat-style agent UIs share (the
// AG-UI run endpoint in hub/agui, the AI SDK chat transports in
// hub/aisdk): the thread or chat a client names is a runhub session,
// created for the caller when new; a run starts through the core's Control
// like any other start; the events come from the journal.
package interop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/hub/httpx"
	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// errForeignThread answers a thread or chat id that is another caller's
// session.
func errForeignThread(field string) *protocol.Error {
	return httpx.FieldErr(protocol.CodeForbidden, field, "names a session of another caller")
}

// ChatSession returns the session id names for subject, creating it when
// it does not exist; field is the request field that named it. Another
// subject's session is refused with forbidden.
func ChatSession(ctx context.Context, core hub.API, subject, field, id string) (journal.SessionMeta, error) {
	if err := protocol.ValidID(id); err != nil {
		pe := err.(*protocol.Error)
		return journal.SessionMeta{}, httpx.FieldErr(pe.Code, field, "%s", pe.Message)
	}
	meta, err := core.OpenSession(ctx, subject, id)
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Code == protocol.CodeConflict:
		return meta, protocol.Errorf(protocol.CodeConflict, "%s: the session is being created; retry", field)
	case err != nil:
		return meta, err
	case meta.Owner != subject:
		return meta, errForeignThread(field)
	}
	return meta, nil
}

// StartOptions are the runhub start fields a client passes beside its
// messages: forwardedProps.runhub (AG-UI), body.runhub (AI SDK).
type StartOptions struct {
	Profile   string          `json:"profile"`
	Provider  string          `json:"provider"`
	Model     string          `json:"model"`
	Workspace string          `json:"workspace"`
	Toolsets  []string        `json:"toolsets"`
	Metadata  json.RawMessage `json:"metadata"`
}

// ParseStartOptions reads the "runhub" member of raw (an object or
// absent); field names raw in errors.
func ParseStartOptions(raw json.RawMessage, field string) (StartOptions, error) {
	var o StartOptions
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	var outer struct {
		Runhub json.RawMessage `json:"runhub"`
	}
	if json.Unmarshal(raw, &outer) != nil {
		return o, nil // not an object: nothing for runhub in it
	}
	return DecodeStartOptions(outer.Runhub, field+".runhub")
}

// DecodeStartOptions decodes a "runhub" member (an object or absent).
func DecodeStartOptions(raw json.RawMessage, field string) (StartOptions, error) {
	var o StartOptions
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return o, httpx.FieldErr(protocol.CodeBadRequest, field+"."+te.Field, "has the wrong JSON type")
		}
		return o, httpx.FieldErr(protocol.CodeBadRequest, field, "must be an object")
	}
	return o, nil
}

// StartChatRun starts a run of message in session sid for subject through
// the core's Control. extra is merged into the start's metadata (the
// client's own, from opts) under its keys. An unknown profile is
// not_found.
func StartChatRun(ctx context.Context, core hub.API, subject, sid, message string, opts StartOptions, extra map[string]any) (protocol.ControlResult, error) {
	md := map[string]any{}
	if len(opts.Metadata) > 0 && string(opts.Metadata) != "null" {
		if err := json.Unmarshal(opts.Metadata, &md); err != nil || md == nil {
			return protocol.ControlResult{}, httpx.FieldErr(protocol.CodeBadRequest, "runhub.metadata", "must be an object")
		}
	}
	for k, v := range extra {
		md[k] = v
	}
	var raw json.RawMessage
	if len(md) > 0 {
		raw, _ = json.Marshal(md)
	}
	m := protocol.Control{Type: protocol.MsgControl, ID: "interop", Op: protocol.OpStart, SessionID: sid, Message: message,
		Profile: opts.Profile, Provider: opts.Provider, Model: opts.Model, Workspace: opts.Workspace, Toolsets: opts.Toolsets, Metadata: raw}
	if err := protocol.ValidateControl(&m); err != nil {
		return protocol.ControlResult{}, err
	}
	res, err := core.Control(ctx, subject, &m, "")
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest && strings.HasPrefix(pe.Message, "profile:") {
		return res, &protocol.Error{Code: protocol.CodeNotFound, Field: "profile", Message: pe.Message}
	}
	return res, err
}

// ScanRun calls fn with every journal event of run rid so far, in order,
// until fn returns false.
func ScanRun(ctx context.Context, core hub.API, rid string, fn func(*protocol.Envelope) bool) error {
	var after uint64
	page := core.Config().ReplayPage
	for {
		events, err := core.Journal().Read(ctx, rid, after, page)
		if err != nil {
			return core.PublicError(err)
		}
		if len(events) == 0 {
			return nil
		}
		for i := range events {
			if !fn(&events[i]) {
				return nil
			}
		}
		after = events[len(events)-1].Seq
	}
}

// BoundedMap is a map of at most max entries; past it the oldest entry
// goes. It is safe for concurrent use.
type BoundedMap[V any] struct {
	mu    sync.Mutex
	max   int
	m     map[string]V
	order []string
}

// NewBoundedMap is an empty BoundedMap of at most max entries.
func NewBoundedMap[V any](max int) *BoundedMap[V] {
	return &BoundedMap[V]{max: max, m: map[string]V{}}
}

// Get returns k's value.
func (b *BoundedMap[V]) Get(k string) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

// Put sets k's value, dropping the oldest entry past the bound.
func (b *BoundedMap[V]) Put(k string, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[k]; !ok {
		b.order = append(b.order, k)
		if len(b.order) > b.max {
			delete(b.m, b.order[0])
			b.order = append(b.order[:0:0], b.order[1:]...)
		}
	}
	b.m[k] = v
}
