package openenv

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Message types a client sends on /ws, and the types a server answers with.
const (
	TypeReset       = "reset"
	TypeStep        = "step"
	TypeState       = "state"
	TypeClose       = "close"
	TypeObservation = "observation"
	TypeError       = "error"
)

// Code is an error code of an error frame (OpenEnv's WSErrorCode).
type Code string

// The error codes.
const (
	// InvalidJSON: the frame is not JSON. The session goes on.
	InvalidJSON Code = "INVALID_JSON"
	// UnknownType: the frame's "type" is none of reset, step, state, close.
	UnknownType Code = "UNKNOWN_TYPE"
	// ValidationError: the message or its action does not fit its model;
	// "errors" lists the problems in pydantic's shape.
	ValidationError Code = "VALIDATION_ERROR"
	// ExecutionError: the environment failed to carry out the message.
	ExecutionError Code = "EXECUTION_ERROR"
	// CapacityReached: MaxConcurrentEnvs sessions are open; the frame
	// carries active_sessions and max_sessions and the connection closes.
	CapacityReached Code = "CAPACITY_REACHED"
	// FactoryError: the environment could not be made; the connection
	// closes.
	FactoryError Code = "FACTORY_ERROR"
	// SessionError: the session cannot go on (a frame that is not a JSON
	// object, a binary frame); the connection closes.
	SessionError Code = "SESSION_ERROR"
)

// Frame is a server's answer: {"type": ..., "data": {...}}.
type Frame struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// Result is an observation with its reward and done flag, as OpenEnv's
// serialize_observation lays it out: reward and done are moved out of the
// observation, and its metadata is dropped.
type Result struct {
	Observation json.RawMessage `json:"observation"`
	Reward      *float64        `json:"reward"`
	Done        bool            `json:"done"`
}

// Decode unmarshals the observation into v.
func (r *Result) Decode(v any) error { return json.Unmarshal(r.Observation, v) }

// Observation is what an Env returns from Reset and Step.
type Observation struct {
	// Fields are the observation's own fields (a struct or map), without
	// reward, done and metadata.
	Fields any
	// Reward is null when nil.
	Reward *float64
	Done   bool
}

// MarshalJSON renders the observation as serialize_observation does.
func (o *Observation) MarshalJSON() ([]byte, error) {
	fields, err := json.Marshal(o.Fields)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"observation":%s,"reward":%s,"done":%t}`, fields, pyFloat(o.Reward), o.Done), nil
}

// Float is a number that marshals as Python's json does a float: 1.0, not
// 1, so that clients that type-check the reward see a float.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	return []byte(pyFloat(&v)), nil
}

func pyFloat(f *float64) string {
	switch {
	case f == nil, math.IsNaN(*f), math.IsInf(*f, 0):
		// JSON has no NaN or infinity; null is the honest answer.
		return "null"
	case *f == math.Trunc(*f) && math.Abs(*f) < 1e16:
		return strconv.FormatFloat(*f, 'f', 1, 64)
	}
	return strconv.FormatFloat(*f, 'g', -1, 64)
}

// ErrorData is the data of an error frame. Fields other than message and
// code ride in Extra (active_sessions, max_sessions, errors, factory_name).
type ErrorData struct {
	Message string
	Code    Code
	Extra   map[string]any
}

// MarshalJSON writes message and code first, as OpenEnv does, then Extra.
func (e ErrorData) MarshalJSON() ([]byte, error) {
	msg, _ := json.Marshal(e.Message)
	b := fmt.Appendf(nil, `{"message":%s,"code":%q`, msg, e.Code)
	for _, k := range []string{"active_sessions", "max_sessions", "factory_name", "errors"} {
		v, ok := e.Extra[k]
		if !ok {
			continue
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b = fmt.Appendf(b, `,%q:%s`, k, vb)
	}
	return append(b, '}'), nil
}

func errorFrame(e ErrorData) []byte {
	data, _ := e.MarshalJSON()
	b, _ := json.Marshal(Frame{Type: TypeError, Data: data})
	return b
}

func dataFrame(typ string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Frame{Type: typ, Data: data})
}

// capacityMessage is OpenEnv's SessionCapacityError text.
func capacityMessage(active, max int) string {
	return fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", active, max)
}

// factoryMessage is OpenEnv's EnvironmentFactoryError text.
func factoryMessage(name string) string {
	return fmt.Sprintf("Environment factory '%s' failed to create instance.", name)
}
