package journal

import (
	"context"
	"encoding/json"
	"errors"
)

// Docs keeps small JSON documents in the journal, each changed by a
// compare-and-set of its version: the state of the Durable Streams
// subscriptions (hub/durable/subscription) lives there. A document is
// stored as a stream's meta (StreamMeta.Doc) without records, through the
// backend's StreamStore, so it is as durable as a stream's commit
// (fdatasynced in bbolt's log, one Lua step in Redis) and it sits under
// its name's hash tag on a Redis Cluster. Document names must never be
// names of streams: the edge reserves the prefix "__ds/" for them.
type Docs interface {
	// LoadDoc returns the document and its version (ErrNotFound when
	// there is none).
	LoadDoc(ctx context.Context, name string) (doc []byte, version uint64, err error)
	// PutDoc stores doc when the stored version is prev (0: none) and
	// returns the new version; ErrConflict when the version is not prev.
	PutDoc(ctx context.Context, name string, prev uint64, doc []byte) (version uint64, err error)
	// DeleteDoc removes the document when its version is version
	// (ErrConflict otherwise; ErrNotFound when there is none).
	DeleteDoc(ctx context.Context, name string, version uint64) error
	// WatchDoc calls fn (without blocking it for long) whenever the
	// document changes, on any node sharing the journal, until cancel.
	WatchDoc(name string, fn func()) (cancel func())
}

// DocHolder is a journal backend that keeps documents (journal/bolt,
// journal/redis and journal/mem are).
type DocHolder interface {
	Docs() Docs
}

// NewDocs returns the documents kept in st.
func NewDocs(st StreamStore) Docs { return docs{st} }

type docs struct{ st StreamStore }

// docGen is every document's generation: it has no records to name.
const docGen = "doc"

func (d docs) LoadDoc(ctx context.Context, name string) ([]byte, uint64, error) {
	m, err := d.st.LoadStream(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	if len(m.Doc) == 0 {
		return nil, 0, errors.New("journal: " + name + " holds a stream, not a document")
	}
	return m.Doc, m.Version, nil
}

func (d docs) PutDoc(ctx context.Context, name string, prev uint64, doc []byte) (uint64, error) {
	if !json.Valid(doc) || len(doc) == 0 {
		return 0, errors.New("journal: a document must be JSON")
	}
	next := StreamMeta{Version: prev + 1, Gen: docGen, Owner: "", ContentType: "application/json", Doc: doc}
	if err := d.st.CommitStream(ctx, name, prev, next, nil); err != nil {
		return 0, err
	}
	d.st.NotifyStream(ctx, name)
	return next.Version, nil
}

func (d docs) DeleteDoc(ctx context.Context, name string, version uint64) error {
	if err := d.st.DropStream(ctx, name, version); err != nil {
		return err
	}
	d.st.NotifyStream(ctx, name)
	return nil
}

func (d docs) WatchDoc(name string, fn func()) func() { return d.st.SubscribeStream(name, fn) }
