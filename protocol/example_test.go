package protocol_test

import (
	"fmt"

	"github.com/runhub/runhub/protocol"
)

func ExampleDecodeClient() {
	frame := []byte(`{"type":"hello","client":"web/1"}` + "\n" +
		`{"type":"focus","session_id":"s1","cursor":"r1:41"}` + "\n" +
		`{"type":"control","id":"c1","op":"approve","run_id":"r1","approval_id":"a1"}`)
	for _, msg := range protocol.SplitBatch(frame) {
		m, err := protocol.DecodeClient(msg)
		if err != nil {
			fmt.Println("error:", protocol.CodeOf(err), err.(*protocol.Error).Field)
			continue
		}
		switch {
		case m.Hello != nil:
			fmt.Println("hello from", m.Hello.Client)
		case m.Focus != nil:
			fmt.Println("focus", *m.Focus.SessionID, "after", m.Focus.Cursor)
		}
	}
	// Output:
	// hello from web/1
	// focus s1 after r1:41
	// error: bad_request choice
}

func ExampleParseCursor() {
	c, err := protocol.ParseCursor("r_01J9Z.a:42")
	fmt.Println(c.RunID, c.Seq, err)
	fmt.Println(protocol.Cursor{RunID: c.RunID, Seq: c.Seq + 1})

	_, err = protocol.ParseCursor("r_01J9Z.a:042")
	fmt.Println(protocol.CodeOf(err))
	// Output:
	// r_01J9Z.a 42 <nil>
	// r_01J9Z.a:43
	// bad_cursor
}

func ExampleEncodeEvent() {
	e := protocol.Envelope{EventID: "r1:3", Seq: 3, RunID: "r1", SessionID: "s1",
		Type: protocol.EventTokenDelta, CreatedAt: 1778750000.123,
		Payload: []byte(`{"message_id":"m1","text":"Hel"}`)}

	// Encode once, send the same bytes to every focused tab; frames batch
	// messages separated by newlines.
	frame, _ := protocol.EncodeEvent(nil, &e)
	frame = append(frame, '\n')
	frame, _ = protocol.EncodeEvent(frame, &e)
	fmt.Println(string(frame))

	v, _ := protocol.DecodeServer(protocol.SplitBatch(frame)[1])
	fmt.Println(v.(*protocol.EventMessage).Event.EventID)
	// Output:
	// {"type":"event","event":{"event_id":"r1:3","seq":3,"run_id":"r1","session_id":"s1","type":"token.delta","created_at":1778750000.123,"terminal":false,"payload":{"message_id":"m1","text":"Hel"}}}
	// {"type":"event","event":{"event_id":"r1:3","seq":3,"run_id":"r1","session_id":"s1","type":"token.delta","created_at":1778750000.123,"terminal":false,"payload":{"message_id":"m1","text":"Hel"}}}
	// r1:3
}

func ExampleNewEvent() {
	e, err := protocol.NewEvent("r1", "s1", protocol.EventError,
		protocol.ErrorPayload{Code: protocol.ErrorTimeout, Message: "no answer in 10m", Terminal: true})
	if err != nil {
		panic(err)
	}
	// The journal assigns Seq and EventID; ValidateEvent checks the rest.
	fmt.Println(e.Type, e.Terminal, string(e.Payload))
	fmt.Println(protocol.ValidateEvent(&e))

	e.Terminal = false
	fmt.Println(protocol.ValidateEvent(&e))
	// Output:
	// error true {"code":"timeout","message":"no answer in 10m","terminal":true}
	// <nil>
	// bad_request: terminal: is false but a error event with this payload is true
}
