package e2bserve

import (
	"fmt"
	"strconv"
	"time"
)

func fmtMsg(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// expired reports whether a signature expiration (unix seconds) has passed;
// a malformed one counts as passed.
func expired(exp string) bool {
	n, err := strconv.ParseInt(exp, 10, 64)
	return err != nil || time.Now().Unix() > n
}
