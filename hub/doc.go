// Package hub serves browser tabs: one WebSocket per tab carrying the status
// of every watched session and every event of the one focused session.
package hub
