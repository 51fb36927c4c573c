package hub

import (
	"strings"
	"testing"
)

// An unwatched session's unsent status leaves no trace: the next frame has
// no empty line where it was, and a later status of that session is sent
// once.
func TestOutbox_DropStatusesLeavesNoEmptyLine(t *testing.T) {
	var o outbox
	o.putStatus("s1", []byte(`{"type":"status","session_id":"s1"}`))
	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2"}`))
	o.dropStatuses([]string{"s1"})
	frame, _ := o.take(nil, 1<<20)
	if got, want := string(frame), `{"type":"status","session_id":"s2"}`; got != want {
		t.Fatalf("frame after dropping s1 = %q, want %q", got, want)
	}

	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2","n":2}`))
	o.dropStatuses([]string{"s2"})
	o.putStatus("s2", []byte(`{"type":"status","session_id":"s2","n":3}`))
	frame, _ = o.take(nil, 1<<20)
	if got := strings.Count(string(frame), "\n") + 1; got != 1 || strings.Contains(string(frame), "\n\n") || !strings.HasSuffix(string(frame), `"n":3}`) {
		t.Fatalf("frame after re-queuing s2 = %q, want the one status n=3", frame)
	}
	if len(o.statusOrder) != 0 || len(o.statuses) != 0 {
		t.Fatalf("outbox keeps %v / %d statuses after a full take", o.statusOrder, len(o.statuses))
	}
}
