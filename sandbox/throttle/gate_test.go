package throttle

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth/sandbox"
)

func TestRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{sandbox.Errorf(sandbox.Unavailable, "connection reset"), true},
		{sandbox.Errorf(sandbox.ResourceExhausted, "slow down"), true},
		{Permanent(sandbox.Errorf(sandbox.ResourceExhausted, "Total disk limit exceeded")), false},
		{sandbox.Errorf(sandbox.InvalidArgument, "bad image"), false},
		{sandbox.Errorf(sandbox.NotFound, "429 is in this id but the class decides"), false},
		{errors.New("HTTP 429 Too Many Requests"), true},
		{errors.New("daytona throttler: try later"), true},
		{fmt.Errorf("create: %w", errors.New("rate limit reached")), true},
		{errors.New("image not found"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	// Permanent keeps the class and the message.
	p := Permanent(sandbox.Errorf(sandbox.ResourceExhausted, "quota"))
	if !errors.Is(p, sandbox.ErrResourceExhausted) || p.Error() != "quota" {
		t.Errorf("Permanent changed the error: %v", p)
	}
}

func TestBackoffBounds(t *testing.T) {
	base, max := 2*time.Second, 30*time.Second
	for n := 1; n <= 40; n++ {
		want := min(max, base<<min(n-1, 30))
		for range 50 {
			d := Backoff(n, base, max)
			if d < want/2 || d > want*3/2 {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, d, want/2, want*3/2)
			}
		}
	}
}
