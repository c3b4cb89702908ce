package container

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentCreateAndDelete(t *testing.T) {
	needRoot(t)
	r := testRuntime(t)
	const n = 8
	cts := make([]*Container, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c, sock := agentConfig(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cts[i], errs[i] = r.Create(context.Background(), c)
			if errs[i] == nil {
				// Each agent answers on its own socket.
				if got, err := agentGetErr(sock, "/hello"); err != nil || !strings.HasPrefix(got, "pid=1 ") {
					t.Errorf("agent %d: %q, %v", i, got, err)
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cts[i].Delete(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("delete %d: %v", i, err)
		}
		assertGone(t, r, cts[i])
	}
}
