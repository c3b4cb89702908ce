package daytonatest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// The toolbox daemon shapes session output by the client's SDK version,
// which the SDKs send as X-Daytona-SDK-Version (a WebSocket client may
// offer it as the subprotocol "X-Daytona-SDK-Version~<version>").

// sdkVersion is the client's SDK version, "" when it names none.
func sdkVersion(h http.Header) string {
	if v := h.Get("X-Daytona-SDK-Version"); v != "" {
		return v
	}
	for _, p := range h.Values("Sec-WebSocket-Protocol") {
		for _, e := range strings.Split(p, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(e), "X-Daytona-SDK-Version~"); ok {
				return v
			}
		}
	}
	return ""
}

// combinedOutput: stdout and stderr merged, markers stripped. SDKs before
// 0.27 want it, and so do clients that name no version unless they send
// X-Daytona-Split-Output: true (berth's driver does).
func combinedOutput(v string, h http.Header) bool {
	if v == "" {
		return h.Get("X-Daytona-Split-Output") != "true"
	}
	return !strings.Contains(v, "dev") && versionBefore(v, 0, 27)
}

// skipServerDemux: SDKs before 0.163 split the marked log themselves.
func skipServerDemux(v string) bool {
	return v != "" && !strings.Contains(v, "dev") && versionBefore(v, 0, 163)
}

// versionBefore reports whether v ("0.218.0", "v0.26.1-rc.1") is before
// major.minor. A version that does not parse is not before anything.
func versionBefore(v string, major, minor int) bool {
	core, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma < major || (ma == major && mi < minor)
}

func stripMarks(b []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(b, markOut, nil), markErr, nil)
}

// demux splits a marked log into what each stream wrote, as the daemon
// does: every byte after a marker, up to the next one, belongs to the
// marker's stream.
func demux(b []byte) (stdout, stderr []byte) {
	stdout, stderr = []byte{}, []byte{}
	var cur *[]byte
	for len(b) > 0 {
		switch {
		case bytes.HasPrefix(b, markOut):
			cur, b = &stdout, b[len(markOut):]
			continue
		case bytes.HasPrefix(b, markErr):
			cur, b = &stderr, b[len(markErr):]
			continue
		}
		next := len(b)
		if i := indexMark(b[1:]); i >= 0 {
			next = i + 1
		}
		if cur != nil {
			*cur = append(*cur, b[:next]...)
		}
		b = b[next:]
	}
	return stdout, stderr
}

func indexMark(b []byte) int {
	i, j := bytes.Index(b, markOut), bytes.Index(b, markErr)
	switch {
	case i < 0:
		return j
	case j < 0:
		return i
	}
	return min(i, j)
}
