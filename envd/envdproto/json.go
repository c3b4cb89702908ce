package envdproto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Int64 is a protobuf int64: written as a JSON string, read from a string or
// a number, as the protobuf JSON mapping requires.
type Int64 int64

// MarshalJSON writes the value as a quoted decimal.
func (v Int64) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(v), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts "123", 123 and null.
func (v *Int64) UnmarshalJSON(data []byte) error {
	s := string(bytes.Trim(data, `"`))
	if s == "null" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Protobuf JSON allows exponent forms such as 1e3 for integers.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("envdproto: %s is not an int64", data)
		}
		n = int64(f)
	}
	*v = Int64(n)
	return nil
}

// unmarshalEnum reads an enum given by name or by number; numbers are mapped
// through names, and unknown numbers keep their decimal form so that a newer
// peer's value is carried rather than refused.
func unmarshalEnum(data []byte, names map[int]string) (string, error) {
	if bytes.Equal(data, []byte("null")) {
		return "", nil
	}
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	n, err := strconv.Atoi(string(data))
	if err != nil {
		return "", fmt.Errorf("envdproto: enum value %s is neither a name nor a number", data)
	}
	if name, ok := names[n]; ok {
		return name, nil
	}
	return strconv.Itoa(n), nil
}
