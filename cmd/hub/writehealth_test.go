package main

import (
	"errors"
	"testing"

	"github.com/runhub/runhub/journal"
)

// A failed write makes the journal unwritable until a write succeeds; an
// answer (not found, terminal) is no fault; successes while healthy keep
// it healthy.
func TestWriteHealth_FailureUntilSuccess(t *testing.T) {
	s := watchWrites(nil)
	s.note(nil)
	if err := s.failing(); err != nil {
		t.Fatalf("healthy: failing() = %v", err)
	}
	disk := errors.New("no space left on device")
	s.note(disk)
	if err := s.failing(); !errors.Is(err, disk) {
		t.Fatalf("after a failed write: failing() = %v, want %v", err, disk)
	}
	s.note(journal.ErrTerminal) // an answer, not a recovery
	if err := s.failing(); !errors.Is(err, disk) {
		t.Fatalf("after ErrTerminal: failing() = %v, want still %v", err, disk)
	}
	s.note(nil)
	if err := s.failing(); err != nil {
		t.Fatalf("after a successful write: failing() = %v, want nil", err)
	}
	s.note(nil)
	s.note(disk)
	if err := s.failing(); !errors.Is(err, disk) {
		t.Fatalf("a second failure: failing() = %v", err)
	}
}
