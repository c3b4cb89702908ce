package e2bserve

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth/e2bapi"
)

// logEntry is one line of a build's log.
type logEntry = e2bapi.BuildLogEntry

// logLevels orders LogLevel for the status route's level filter.
var logLevels = map[string]int{e2bapi.LevelDebug: 0, e2bapi.LevelInfo: 1, e2bapi.LevelWarn: 2, e2bapi.LevelError: 3}

// Bounds of one build log besides its byte limit.
const (
	maxLogLine   = 4 << 10 // longer lines are cut
	logTailLines = 30      // kept past the limit, and a failure's reason
)

// buildLog is one build's log: the lines the builder writes (its step
// headers and what RUN prints) as entries with a growing index, which the
// SDK polls with logsOffset. It keeps at most max bytes of messages; past
// that lines are counted, not kept, except the last logTailLines, which
// end the log when the build does, after a line saying how many were
// left out. Offsets already handed out stay valid.
type buildLog struct {
	max   int
	lines map[int]stepLine // the recipe's: "Dockerfile:N: ..." -> step

	mu      sync.Mutex
	entries []logEntry
	bytes   int
	dropped int
	tail    []logEntry // the last lines left out
	partial []byte
	step    string // of the last step header seen
	closed  bool
}

func newBuildLog(max int) *buildLog { return &buildLog{max: max} }

// setLines names the steps of the recipe's Dockerfile lines.
func (l *buildLog) setLines(lines map[int]stepLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = lines
}

// add appends one entry (cut to maxLogLine).
func (l *buildLog) add(level, step, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addLocked(logEntry{Timestamp: time.Now().UTC(), Level: level, Message: msg, Step: step})
}

func (l *buildLog) addLocked(e logEntry) {
	if len(e.Message) > maxLogLine {
		e.Message = e.Message[:maxLogLine] + " [line cut]"
	}
	if l.closed {
		return
	}
	if l.bytes+len(e.Message) > l.max {
		l.dropped++
		l.tail = append(l.tail, e)
		if len(l.tail) > logTailLines {
			l.tail = l.tail[1:]
		}
		return
	}
	l.bytes += len(e.Message)
	l.entries = append(l.entries, e)
}

// Write takes the builder's output; lines become entries. A step header
// ("Dockerfile:N: ...") becomes the step as the template named it, and
// the lines after it belong to that step.
func (l *buildLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.partial = append(l.partial, p...)
			if len(l.partial) > maxLogLine {
				l.lineLocked(string(l.partial))
				l.partial = l.partial[:0]
			}
			break
		}
		line := string(p[:i])
		if len(l.partial) > 0 {
			line = string(l.partial) + line
			l.partial = l.partial[:0]
		}
		l.lineLocked(line)
		p = p[i+1:]
	}
	return n, nil
}

func (l *buildLog) lineLocked(s string) {
	s = strings.TrimSuffix(s, "\r")
	if rest, ok := strings.CutPrefix(s, "Dockerfile:"); ok {
		num, _, _ := strings.Cut(rest, ":")
		if n, err := strconv.Atoi(num); err == nil {
			if sl, ok := l.lines[n]; ok {
				l.step = sl.step
				l.addLocked(logEntry{Timestamp: time.Now().UTC(), Level: e2bapi.LevelInfo, Step: sl.step, Message: stepHeader(sl)})
				return
			}
		}
	}
	l.addLocked(logEntry{Timestamp: time.Now().UTC(), Level: e2bapi.LevelInfo, Step: l.step, Message: s})
}

func stepHeader(sl stepLine) string {
	show := sl.show
	if len(show) > 500 {
		show = show[:500] + "..."
	}
	if sl.step == stepBase {
		return "[base] " + show
	}
	return "[step " + sl.step + "] " + show
}

// close ends the log: a partial line becomes an entry, then what was left
// out is said and its last lines follow. Later writes are dropped.
func (l *buildLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if len(l.partial) > 0 {
		l.lineLocked(string(l.partial))
		l.partial = nil
	}
	l.closed = true
	if l.dropped == 0 {
		return
	}
	l.entries = append(l.entries, logEntry{Timestamp: time.Now().UTC(), Level: e2bapi.LevelWarn, Step: l.step,
		Message: fmt.Sprintf("... %d log lines left out (this server keeps %d bytes of a build's log); the last %d follow", l.dropped, l.max, len(l.tail))})
	l.entries = append(l.entries, l.tail...)
	l.tail = nil
}

// page returns up to limit entries from offset at or above level.
func (l *buildLog) page(offset, limit int, level string) []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []logEntry{}
	minLevel := logLevels[level]
	seen := 0
	for _, e := range l.entries {
		if logLevels[e.Level] < minLevel {
			continue
		}
		if seen >= offset && len(out) < limit {
			out = append(out, e)
		}
		seen++
	}
	return out
}

// last returns the last n entries (a failure's reason shows them).
func (l *buildLog) last(n int) []logEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	src := append(append([]logEntry(nil), l.entries...), l.tail...)
	if len(src) > n {
		src = src[len(src)-n:]
	}
	return src
}
