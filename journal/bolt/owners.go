package bolt

import (
	"bytes"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/runhub/runhub/journal"
)

// The owners bucket orders each owner's sessions by creation; owner_keys
// maps a session to its key there, so that a page of the list starts, and
// a deletion finds its entry, with one seek, wherever the session is in
// its owner's list.

// createSession registers r.session and indexes it under its owner.
func (w *writer) createSession(r *request) error {
	m := r.session
	ss, err := w.session(m.ID)
	if err != nil {
		return err
	}
	if ss != nil {
		r.err = fmt.Errorf("session %q: %w", m.ID, journal.ErrExists)
		return nil
	}
	owners := w.mustBucket(bOwners)
	n, err := owners.NextSequence()
	if err != nil {
		return err
	}
	k := ownerKey(m.Owner, n)
	if err := owners.Put(k, []byte(m.ID)); err != nil {
		return err
	}
	if err := w.mustBucket(bOwnerKeys).Put([]byte(m.ID), k); err != nil {
		return err
	}
	w.sessCache[m.ID] = &sessState{meta: m, dirty: true}
	return nil
}

// ownedKey returns session id's key in owners (of owner), nil when it has
// none: from owner_keys, checked against owners.
func ownedKey(owners, keys *bbolt.Bucket, owner, id string) []byte {
	k := keys.Get([]byte(id))
	prefix := ownerPrefix(owner)
	if k == nil || !bytes.HasPrefix(k, prefix) || len(k) != len(prefix)+8 || string(owners.Get(k)) != id {
		return nil
	}
	return k
}

// deleteOwned removes session id from its owner's index.
func (w *writer) deleteOwned(owner, id string) error {
	owners, keys := w.mustBucket(bOwners), w.mustBucket(bOwnerKeys)
	if k := ownedKey(owners, keys, owner, id); k != nil {
		if err := owners.Delete(bytes.Clone(k)); err != nil {
			return err
		}
		return keys.Delete([]byte(id))
	}
	// Not in owner_keys (it always is once built): walk the owner's list.
	prefix := ownerPrefix(owner)
	c := owners.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) == len(prefix)+8 && string(v) == id {
			return owners.Delete(bytes.Clone(k))
		}
	}
	return nil
}

// buildOwnerKeys fills owner_keys from owners, once: a file written before
// it existed (metaOwnerKeysIndex records that it is done).
func (s *Store) buildOwnerKeys() error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(metaOwnerKeysIndex) != nil {
			return nil
		}
		keys := tx.Bucket(bucketOwnerKeys)
		if err := tx.Bucket(bucketOwners).ForEach(func(k, v []byte) error {
			return keys.Put(bytes.Clone(v), bytes.Clone(k))
		}); err != nil {
			return err
		}
		return meta.Put(metaOwnerKeysIndex, []byte{1})
	})
}
