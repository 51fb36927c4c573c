package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/runhub/runhub/hub"
	"github.com/runhub/runhub/journal/bolt"
	"github.com/runhub/runhub/protocol"
)

// The seed is what the hub will list: n sessions of an open hub's caller,
// each with one completed run of three events.
func TestSeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	const n = 1000
	if err := seed(path, n); err != nil {
		t.Fatal(err)
	}
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	list, err := s.Sessions(ctx, hub.OpenSubject)
	if err != nil || len(list) != n {
		t.Fatalf("%d sessions (%v), want %d", len(list), err, n)
	}
	for _, m := range list[:10] {
		if len(m.Runs) != 1 || m.ActiveRun != "" {
			t.Fatalf("session %+v: want one finished run", m)
		}
		r, err := s.Run(ctx, m.Runs[0])
		if err != nil || !r.Terminal || r.LastSeq != 3 || r.TerminalType != protocol.EventDone {
			t.Fatalf("run %+v (%v): want done at seq 3", r, err)
		}
	}
}

func TestParseSizes(t *testing.T) {
	if got, err := parseSizes("1000, 20000"); err != nil || len(got) != 2 || got[1] != 20000 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "10", "1e6", "1000,x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
