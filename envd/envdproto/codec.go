package envdproto

import (
	"bytes"
	"encoding/json"
)

// Codec is the Connect codec named "json" that encodes the structs of this
// package with encoding/json. Pass it with connect.WithCodec to handlers and
// clients so that they speak application/json and application/connect+json.
type Codec struct{}

// Name is the codec name, which Connect turns into the content types.
func (Codec) Name() string { return "json" }

// Marshal encodes msg.
func (Codec) Marshal(msg any) ([]byte, error) { return json.Marshal(msg) }

// MarshalAppend encodes msg after dst, sparing Connect a copy.
func (Codec) MarshalAppend(dst []byte, msg any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(msg); err != nil {
		return dst, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // drop Encode's newline
}

// Unmarshal decodes data into msg; unknown fields are ignored. An empty body
// is the empty message, as in protobuf JSON clients that send nothing.
func (Codec) Unmarshal(data []byte, msg any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	return json.Unmarshal(data, msg)
}
