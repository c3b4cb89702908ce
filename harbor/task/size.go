package task

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// parseSizeMB reads the legacy memory / storage forms: "4G", "512M",
// "1024K", "2Gi", "10GB", or a bare number of megabytes.
func parseSizeMB(v any) (int, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("size %d is negative", x)
		}
		return int(x), nil
	case float64:
		if x < 0 {
			return 0, fmt.Errorf("size %v is negative", x)
		}
		return int(math.Ceil(x)), nil
	case string:
		return parseSizeString(x)
	default:
		return 0, fmt.Errorf("size %v: want a string such as \"4G\" or a number of MB", v)
	}
}

func parseSizeString(s string) (int, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := 1.0 // megabytes
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1.0/1024, t[:n-1]
		case 'M':
			t = t[:n-1]
		case 'G':
			mult, t = 1024, t[:n-1]
		case 'T':
			mult, t = 1024*1024, t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: want a number with an optional K, M, G or T suffix", s)
	}
	return int(math.Ceil(f * mult)), nil
}
