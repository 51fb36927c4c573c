package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	goredis "github.com/redis/go-redis/v9"

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

// Redis not answering (a network partition: a dial or read timing out, a
// connection reset) is no write refused: /readyz says "redis unreachable"
// while its PING fails, and nothing keeps the process unready once Redis
// answers again. A write Redis refuses, or a full disk, still counts.
func TestWriteHealth_UnreachableIsNoWriteFailure(t *testing.T) {
	s := watchWrites(nil)
	for _, err := range []error{
		fmt.Errorf("journal/redis: create session: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}),
		fmt.Errorf("journal/redis: append: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}),
		fmt.Errorf("journal/redis: append: %w", io.EOF),
		goredis.ErrPoolTimeout,
	} {
		s.note(err)
		if got := s.failing(); got != nil {
			t.Fatalf("after %v: failing() = %v, want nil", err, got)
		}
	}
	for _, err := range []error{
		&fs.PathError{Op: "write", Path: "journal.db.events/0001", Err: syscall.ENOSPC},
		errors.New("OOM command not allowed when used memory > 'maxmemory'"),
	} {
		s.note(err)
		if got := s.failing(); !errors.Is(got, err) {
			t.Fatalf("after %v: failing() = %v", err, got)
		}
	}
}
