package model

import "encoding/json"

// A student's ToolCall module, as the seed's host drives it: begin,
// receive, expire and view over a call value the host never looks inside.
// The checker (check.go) plays the same cases on the reference (the Call
// of this package) and on a Client, and compares what each shows and says.

// ClientCall is a call value of a student's module: opaque to the host,
// as in the seed's main.js.
type ClientCall any

// Client is a student's module. Each method's error is the module's own
// failure (a throw, a wrong shape, a budget spent), said in a sentence
// with where it happened; the checker reports it as the step's error.
type Client interface {
	Begin(runID, callID string) (ClientCall, error)
	// Receive and Expire return the new call and the notice.
	Receive(call ClientCall, raw string) (ClientCall, string, error)
	Expire(call ClientCall, runID, callID string) (ClientCall, string, error)
	// View returns what view(call) returned, as JSON text (the module's
	// object as JSON.stringify writes it), so that a missing or mistyped
	// field is seen as it is.
	View(call ClientCall) (json.RawMessage, error)
}

// NewClient makes a fresh instance of a module, with none of the state a
// previous case may have left in it.
type NewClient func() (Client, error)

// CallKeyer is an optional interface of a Client: CallKey is the identity
// of a call value, the JSON text JSON.stringify writes of it. The search
// (search.go) asks the module once per distinct call and message, and
// merges states whose calls have the same key. An error says the value
// cannot be written faithfully (a function, a cycle, a value JSON drops,
// over the size cap): the search then treats that call as unlike any
// other. An error that wraps ErrStop stops the check as any call's does.
type CallKeyer interface {
	CallKey(call ClientCall) (string, error)
}
