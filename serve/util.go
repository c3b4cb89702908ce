package serve

import (
	"crypto/subtle"
	"fmt"
	"strconv"
	"time"
)

func fmtMsg(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func constantEq(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// expired reports whether a signature expiration (unix seconds) has passed;
// a malformed one counts as passed.
func expired(exp string) bool {
	n, err := strconv.ParseInt(exp, 10, 64)
	return err != nil || time.Now().Unix() > n
}
