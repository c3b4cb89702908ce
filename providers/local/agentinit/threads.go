package agentinit

import (
	"runtime"
	"sync"
)

// spareThreads is how many OS threads the agent starts before it serves
// and keeps idle for the Go runtime to reuse.
//
// Threads count against the sandbox's pids limit. When a fork bomb holds
// every pid and the runtime needs one more thread (a goroutine blocked in
// a syscall, its P handed to another thread), clone fails and the runtime
// dies with "fatal error: newosproc", taking the sandbox with it. The
// runtime takes an idle thread before it makes one, so threads made while
// pids are free carry the agent through a full table.
const spareThreads = 24

// reserveThreads makes the runtime start n threads now and leaves them
// idle: n goroutines each lock a thread, and only when all n hold one do
// they unlock and end, handing their threads back to the scheduler.
func reserveThreads(n int) {
	var locked, ended sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	ended.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer ended.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	ended.Wait()
}
