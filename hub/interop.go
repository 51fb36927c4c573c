package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/runhub/runhub/journal"
	"github.com/runhub/runhub/protocol"
)

// What the AG-UI run endpoint (aguirun.go) and the AI SDK chat transports
// (aisdk.go, aisdkws.go) share: the thread or chat a client names is a
// runhub session, created for the caller when new; a run starts through
// Hub.Control like any other start; the events come from the journal.

// fieldErr is a protocol error about one request field, its message
// starting with the field's name.
func fieldErr(code protocol.Code, field, format string, args ...any) *protocol.Error {
	return &protocol.Error{Code: code, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// errForeignThread answers a thread or chat id that is another caller's
// session.
func errForeignThread(field string) *protocol.Error {
	return fieldErr(protocol.CodeForbidden, field, "names a session of another caller")
}

// chatSession returns the session id names for subject, creating it when
// it does not exist; field is the request field that named it. Another
// subject's session is refused with forbidden.
func (h *Hub) chatSession(ctx context.Context, subject, field, id string) (journal.SessionMeta, error) {
	if err := protocol.ValidID(id); err != nil {
		pe := err.(*protocol.Error)
		return journal.SessionMeta{}, fieldErr(pe.Code, field, "%s", pe.Message)
	}
	for range 2 {
		meta, err := h.store.Session(ctx, id)
		switch {
		case err == nil && meta.Owner != subject:
			return meta, errForeignThread(field)
		case err == nil:
			return meta, nil
		case !errors.Is(err, journal.ErrNotFound):
			return meta, h.publicError(err)
		}
		meta = journal.SessionMeta{ID: id, Owner: subject, CreatedAt: protocol.Timestamp(h.now())}
		err = h.store.CreateSession(ctx, meta)
		if err == nil {
			h.tracker.sessionCreated(meta)
			return meta, nil
		}
		if !errors.Is(err, journal.ErrExists) {
			return meta, h.publicError(err)
		}
		// Created meanwhile (by this caller's retry, or another caller): look again.
	}
	return journal.SessionMeta{}, protocol.Errorf(protocol.CodeConflict, "%s: the session is being created; retry", field)
}

// startOptions are the runhub start fields a client passes beside its
// messages: forwardedProps.runhub (AG-UI), body.runhub (AI SDK).
type startOptions struct {
	Profile   string          `json:"profile"`
	Provider  string          `json:"provider"`
	Model     string          `json:"model"`
	Workspace string          `json:"workspace"`
	Toolsets  []string        `json:"toolsets"`
	Metadata  json.RawMessage `json:"metadata"`
}

// parseStartOptions reads the "runhub" member of raw (an object or
// absent); field names raw in errors.
func parseStartOptions(raw json.RawMessage, field string) (startOptions, error) {
	var o startOptions
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	var outer struct {
		Runhub json.RawMessage `json:"runhub"`
	}
	if json.Unmarshal(raw, &outer) != nil {
		return o, nil // not an object: nothing for runhub in it
	}
	return decodeStartOptions(outer.Runhub, field+".runhub")
}

// decodeStartOptions decodes a "runhub" member (an object or absent).
func decodeStartOptions(raw json.RawMessage, field string) (startOptions, error) {
	var o startOptions
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return o, fieldErr(protocol.CodeBadRequest, field+"."+te.Field, "has the wrong JSON type")
		}
		return o, fieldErr(protocol.CodeBadRequest, field, "must be an object")
	}
	return o, nil
}

// startChatRun starts a run of message in session sid for subject through
// Hub.Control. extra is merged into the start's metadata (the client's
// own, from opts) under its keys. An unknown profile is not_found.
func (h *Hub) startChatRun(ctx context.Context, subject, sid, message string, opts startOptions, extra map[string]any) (protocol.ControlResult, error) {
	md := map[string]any{}
	if len(opts.Metadata) > 0 && string(opts.Metadata) != "null" {
		if err := json.Unmarshal(opts.Metadata, &md); err != nil || md == nil {
			return protocol.ControlResult{}, fieldErr(protocol.CodeBadRequest, "runhub.metadata", "must be an object")
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
	res, err := h.Control(ctx, subject, &m, "")
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest && strings.HasPrefix(pe.Message, "profile:") {
		return res, &protocol.Error{Code: protocol.CodeNotFound, Field: "profile", Message: pe.Message}
	}
	return res, err
}

// scanRun calls fn with every journal event of run rid so far, in order,
// until fn returns false.
func (h *Hub) scanRun(ctx context.Context, rid string, fn func(*protocol.Envelope) bool) error {
	var after uint64
	for {
		page, err := h.store.Read(ctx, rid, after, h.cfg.ReplayPage)
		if err != nil {
			return h.publicError(err)
		}
		if len(page) == 0 {
			return nil
		}
		for i := range page {
			if !fn(&page[i]) {
				return nil
			}
		}
		after = page[len(page)-1].Seq
	}
}

func newBoundedMap[V any](max int) *boundedMap[V] {
	return &boundedMap[V]{max: max, m: map[string]V{}}
}

func (b *boundedMap[V]) get(k string) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

func (b *boundedMap[V]) put(k string, v V) {
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
