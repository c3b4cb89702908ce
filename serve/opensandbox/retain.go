package opensandbox

import (
	"container/list"
	"context"
	"math"
	"sync"
)

// Background commands keep the tail of their combined output for the logs
// call, in memory, under three bounds: Options.MaxLogBytes per command,
// Options.MaxSandboxLogBytes per sandbox (one Execd), and a LogBudget's
// bound over every Execd sharing it (serve/osbserve: one per API key). Past
// a bound, output goes oldest byte first from the command written to least
// recently: finished commands lose theirs before running ones, and a
// flooding command eats its own old output before a quiet one's. Cursors
// stay offsets into the whole output, as upstream's output file counts
// them; a logs answer says how many bytes before its first one are gone
// (DroppedHeader).

// logChunkMax is the largest chunk a log keeps: a partly dropped chunk
// holds at most this much memory beyond what is counted.
const logChunkMax = 64 << 10

// logChunkMin is the first chunk's capacity; later ones double up to
// logChunkMax, so that a small log holds at most twice its bytes.
const logChunkMin = 512

// maxLogAnswers is how many logs answers of one budget are written at
// once; more wait. An answer holds the chunks it sends, dropped or not,
// until its client has read them: this bounds what slow readers pin.
const maxLogAnswers = 4

// LogBudget bounds the background output retained by the Execds that share
// it. Its zero value is not usable; make one with NewLogBudget.
type LogBudget struct {
	mu      sync.Mutex // guards pool and every log of the budget's Execds
	pool    logPool
	answers chan struct{}
}

// NewLogBudget returns a budget of max bytes; max <= 0 means no bound.
func NewLogBudget(max int64) *LogBudget {
	if max <= 0 {
		max = math.MaxInt64
	}
	return &LogBudget{pool: logPool{max: max}, answers: make(chan struct{}, maxLogAnswers)}
}

// Retained is the number of output bytes the budget's Execds hold now.
func (b *LogBudget) Retained() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pool.used
}

// answer waits for a turn to write a logs answer; release gives it back.
func (b *LogBudget) answer(ctx context.Context) (release func(), err error) {
	select {
	case b.answers <- struct{}{}:
		return func() { <-b.answers }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// logPool is one bound: the bytes its logs keep, and those logs (the ones
// keeping any) by last write, least recent first.
type logPool struct {
	max, used int64
	lru       list.List
}

// evict drops output, least recently written first, until the pool is
// within its bound.
func (p *logPool) evict() {
	for p.used > p.max {
		p.lru.Front().Value.(*logBuf).drop(p.used - p.max)
	}
}

// logBuf is one background command's retained output. Its chunks are never
// written below their length, so an answer may send slices of them after
// the lock is released.
type logBuf struct {
	b     *LogBudget
	pools [2]*logPool // the sandbox's, then the budget's
	elems [2]*list.Element
	max   int64

	chunks     [][]byte
	start, end int64 // offsets of the first byte kept and past the last written
	gone       bool  // released: output is counted, not kept
}

func newLogBuf(b *LogBudget, sandboxPool *logPool, max int64) *logBuf {
	return &logBuf{b: b, pools: [2]*logPool{sandboxPool, &b.pool}, max: max}
}

func (l *logBuf) kept() int64 { return l.end - l.start }

// Write keeps p's tail within the bounds; it never fails, as the
// command's output must not block on what the server keeps of it.
func (l *logBuf) Write(p []byte) (int, error) {
	n := len(p)
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if l.gone {
		l.end += int64(n)
		l.start = l.end
		return n, nil
	}
	if int64(len(p)) > l.max {
		p = p[int64(len(p))-l.max:]
	}
	l.drop(l.kept() + int64(len(p)) - l.max)
	if skipped := int64(n - len(p)); skipped > 0 { // nothing is kept now
		l.end += skipped
		l.start = l.end
	}
	l.append(p)
	for i, pool := range l.pools {
		if l.elems[i] == nil {
			l.elems[i] = pool.lru.PushBack(l)
		} else {
			pool.lru.MoveToBack(l.elems[i])
		}
	}
	for _, pool := range l.pools {
		pool.evict()
	}
	return n, nil
}

func (l *logBuf) append(p []byte) {
	l.end += int64(len(p))
	for _, pool := range l.pools {
		pool.used += int64(len(p))
	}
	for len(p) > 0 {
		last := len(l.chunks) - 1
		if last < 0 || len(l.chunks[last]) == cap(l.chunks[last]) {
			size := logChunkMin
			if last >= 0 {
				size = min(2*cap(l.chunks[last]), logChunkMax)
			}
			l.chunks = append(l.chunks, make([]byte, 0, size))
			last++
		}
		c := l.chunks[last]
		k := min(len(p), cap(c)-len(c))
		l.chunks[last] = append(c, p[:k]...)
		p = p[k:]
	}
}

// drop forgets the oldest k bytes kept (all, at most); a log that keeps
// nothing leaves its pools' lists.
func (l *logBuf) drop(k int64) {
	k = min(k, l.kept())
	if k <= 0 {
		return
	}
	l.start += k
	for _, pool := range l.pools {
		pool.used -= k
	}
	for k > 0 {
		c := l.chunks[0]
		if int64(len(c)) > k {
			l.chunks[0] = c[k:]
			break
		}
		k -= int64(len(c))
		l.chunks[0] = nil
		l.chunks = l.chunks[1:]
	}
	if l.kept() == 0 {
		l.chunks = nil
		for i, pool := range l.pools {
			if l.elems[i] != nil {
				pool.lru.Remove(l.elems[i])
				l.elems[i] = nil
			}
		}
	}
}

// release forgets all output, now and from now on (the command is
// forgotten, or its Execd closed).
func (l *logBuf) release() {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	l.drop(l.kept())
	l.gone = true
}

// from returns what is kept from offset cursor on (slices not to be
// written to), the offset to ask from next, and how many bytes from cursor
// on are no longer kept.
func (l *logBuf) from(cursor int64) (data [][]byte, next, dropped int64) {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	cursor = min(max(cursor, 0), l.end)
	if cursor < l.start {
		dropped, cursor = l.start-cursor, l.start
	}
	skip := cursor - l.start
	for _, c := range l.chunks {
		if skip >= int64(len(c)) {
			skip -= int64(len(c))
			continue
		}
		data = append(data, c[skip:])
		skip = 0
	}
	return data, l.end, dropped
}
