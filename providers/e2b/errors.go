package e2b

import (
	"encoding/json"
	"strings"

	"github.com/berth-sh/berth/providers/internal/rest"
)

// APIError is a non-2xx answer of the control plane: the shared REST
// client's error, with the status, route and the server's message.
// errors.As finds it in the driver's errors.
type APIError = rest.APIError

// errorBody reads E2B's error answer, {"code","message"}, or plain text.
// The code is returned too: servers answer a missing sandbox with code 404
// on routes whose status says something else.
func errorBody(body []byte) (string, int) {
	var b struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &b) == nil {
		return b.Message, b.Code
	}
	return strings.TrimSpace(string(body)), 0
}
