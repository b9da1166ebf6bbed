package sandbox

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// cappedBuffer keeps the first limit bytes written to it and counts the
// rest. Writes never fail: a program that prints without end must be drained
// (not blocked on a full pipe, which would look like a hang) until it exits
// or its timeout kills it. Safe for concurrent use.
type cappedBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped int64
}

func newCappedBuffer(limit int) *cappedBuffer {
	return &cappedBuffer{limit: limit, buf: make([]byte, 0, min(limit, 4096))}
}

// Write implements io.Writer.
func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		c.buf = append(c.buf, p[:room]...)
	}
	c.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// Truncated reports whether output was dropped.
func (c *cappedBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped > 0
}

// String returns the kept output as valid UTF-8 text, ending with a marker
// line when output was dropped. The output ends up in a message stored as
// text (Postgres rejects invalid UTF-8 and NUL bytes), so invalid sequences
// and NUL bytes become U+FFFD, and a character cut in half by the cap is
// dropped.
func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	if c.dropped > 0 {
		b = trimPartialRune(b)
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if c.dropped > 0 {
		s += truncationMarker(c.limit)
	}
	return s
}

// truncationMarker is the line that ends a capped output.
func truncationMarker(limit int) string {
	return fmt.Sprintf("\n[output truncated at %d bytes]", limit)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
