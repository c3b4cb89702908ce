package tokenizer

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
)

type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (t *Tokenizer) setMerges(raw []json.RawMessage) error {
	t.merges = make(map[uint64]merge, len(raw))
	for rank, r := range raw {
		var a, b string
		var pair []string
		if err := json.Unmarshal(r, &pair); err == nil {
			if len(pair) != 2 {
				return fmt.Errorf("merge %d: want two parts, got %d", rank, len(pair))
			}
			a, b = pair[0], pair[1]
		} else {
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return fmt.Errorf("merge %d: %w", rank, err)
			}
			// "a b" as JavaScript's split(" ", 2) reads it.
			parts := strings.SplitN(s, " ", 3)
			if len(parts) < 2 {
				return fmt.Errorf("merge %d: %q has no space", rank, s)
			}
			a, b = parts[0], parts[1]
		}
		ia, okA := t.vocab[a]
		ib, okB := t.vocab[b]
		im, okM := t.vocab[a+b]
		if !okA || !okB || !okM {
			continue // cannot apply: a part or the result is not a token
		}
		t.merges[pairKey(int32(ia), int32(ib))] = merge{rank: int32(rank), id: int32(im)}
	}
	return nil
}

// symbol is one live token of a word being merged; removed ones have n == 0.
type symbol struct {
	id         int32
	prev, next int32
	n          int32
}

type candidate struct {
	rank, pos int32 // pos: index of the left symbol (its original start)
	left, rgt int32 // the ids the merge expects
	id        int32
}

// candidates is a binary min-heap by (rank, pos), written out for the
// type: container/heap boxes every element in an interface, an allocation
// per push, which for a long piece cost more than the merging itself. The
// order is total (a rank is one pair), so the pops are the same whatever
// the heap's shape.
type candidates []candidate

func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || (c.rank == d.rank && c.pos < d.pos)
}

func (q *candidates) push(c candidate) {
	h := append(*q, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *candidates) pop() candidate {
	h := *q
	top, n := h[0], len(h)-1
	h[0] = h[n]
	*q = h[:n]
	q.down(0)
	return top
}

func (q candidates) down(i int) {
	for n := len(q); ; {
		m := 2*i + 1
		if m >= n {
			return
		}
		if r := m + 1; r < n && q[r].less(q[m]) {
			m = r
		}
		if !q[m].less(q[i]) {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}

// bpe encodes one pre-tokenized piece (raw bytes) and appends its ids: the
// lowest-ranked adjacent pair merges first, the leftmost among equals.
func (t *Tokenizer) bpe(piece string, out []int) []int {
	if t.ignoreMerges {
		if id, ok := t.vocab[byteLevel(piece)]; ok {
			return append(out, id)
		}
	}
	if len(piece) < maxCachedPiece {
		if ids, ok := t.cache.get(piece); ok {
			return append(out, ids...)
		}
	}
	syms := make([]symbol, len(piece))
	for i := 0; i < len(piece); i++ {
		syms[i] = symbol{id: t.byteID[piece[i]], prev: int32(i) - 1, next: int32(i) + 1, n: 1}
	}
	syms[len(syms)-1].next = -1
	pair := func(pos int32) (candidate, bool) {
		nx := syms[pos].next
		if nx < 0 {
			return candidate{}, false
		}
		m, ok := t.merges[pairKey(syms[pos].id, syms[nx].id)]
		return candidate{rank: m.rank, pos: pos, left: syms[pos].id, rgt: syms[nx].id, id: m.id}, ok
	}
	q := make(candidates, 0, len(syms))
	push := func(pos int32) {
		if c, ok := pair(pos); ok {
			q.push(c)
		}
	}
	for i := range syms {
		if c, ok := pair(int32(i)); ok {
			q = append(q, c)
		}
	}
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
	for len(q) > 0 {
		c := q.pop()
		s := &syms[c.pos]
		if s.n == 0 || s.next < 0 || s.id != c.left || syms[s.next].id != c.rgt {
			continue // stale: one side merged since
		}
		r := &syms[s.next]
		s.id, s.n = c.id, s.n+r.n
		s.next = r.next
		r.n = 0
		if s.next >= 0 {
			syms[s.next].prev = c.pos
		}
		if s.prev >= 0 {
			push(s.prev)
		}
		push(c.pos)
	}
	start := len(out)
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, int(syms[i].id))
	}
	if len(piece) < maxCachedPiece {
		t.cache.put(piece, append([]int(nil), out[start:]...))
	}
	return out
}

func byteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// The cache of encoded pieces: sharded, each shard cleared when full, so
// memory stays bounded whatever the input.
const (
	maxCachedPiece = 256
	cacheShards    = 32
	shardEntries   = 4096
)

type cache struct {
	seed   maphash.Seed
	shards [cacheShards]struct {
		sync.RWMutex
		m map[string][]int
	}
}

func newCache() *cache {
	c := &cache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = map[string][]int{}
	}
	return c
}

func (c *cache) shard(k string) int { return int(maphash.String(c.seed, k) % cacheShards) }

func (c *cache) get(k string) ([]int, bool) {
	s := &c.shards[c.shard(k)]
	s.RLock()
	v, ok := s.m[k]
	s.RUnlock()
	return v, ok
}

func (c *cache) put(k string, v []int) {
	s := &c.shards[c.shard(k)]
	s.Lock()
	if len(s.m) >= shardEntries {
		s.m = map[string][]int{}
	}
	s.m[k] = v
	s.Unlock()
}
