package llm

import (
	"encoding/json"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// decode resets c and decodes the chunk raw into it. For every raw, what
// it leaves in c and the error it returns are those of
//
//	*c = streamChunk{}
//	err := json.Unmarshal(raw, c)
//
// (FuzzStreamChunk holds it to that).
//
// A server with thousands of chats waiting on streaming models decodes a
// chunk a token, and encoding/json's Unmarshal was 37% of the CPU of a
// streamed call (BenchmarkOpenAIStreamedReply). The chunks of OpenAI,
// Azure, vLLM, Ollama and llama.cpp have one shape, tool call deltas and
// the last chunk's usage included, so decodeFast reads that shape in one
// pass over the bytes: a real content chunk in about a tenth of
// encoding/json's time, with one allocation (its content) instead of
// twelve (BenchmarkChunkDecode), and a streamed call of ten tokens in half
// the time it took.
//
// decodeFast never reports an error, and decides nothing encoding/json
// might decide otherwise: on anything it does not know (a number that is
// not an integer in range, a key spelt in another case or escaped, a key
// given twice, invalid UTF-8, a value of the wrong type, bad syntax) it
// gives up, and encoding/json decodes the chunk from the start. Its
// strings are copies: raw is the stream's read buffer, and the next read
// writes over it.
func (c *streamChunk) decode(raw []byte) error {
	if c.decodeFast(raw) {
		return nil
	}
	*c = streamChunk{}
	return json.Unmarshal(raw, c)
}

// decodeFast resets c and decodes raw into it if raw has the common shape,
// and reports whether it did; if it did not, c holds what it had decoded
// when it gave up.
//
// A chunk is decoded into the chunk before it (tryStream reuses one), so
// the choices go into the array of the chunk before (each choice zeroed
// first), and an id or a model equal to the one before is that string:
// a stream's chunks repeat both, and neither is then allocated again.
func (c *streamChunk) decodeFast(raw []byte) bool {
	prevID, prevModel, choices := c.ID, c.Model, c.Choices[:0]
	*c = streamChunk{}
	s := chunkScanner{b: raw}
	var seen fieldSet
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "id":
			return seen.first(0) && s.str(&c.ID, prevID)
		case "created":
			return seen.first(1) && s.integer64(&c.Created)
		case "model":
			return seen.first(2) && s.str(&c.Model, prevModel)
		case "usage":
			return seen.first(3) && s.usage(&c.Usage)
		case "choices":
			return seen.first(4) && s.choices(&c.Choices, choices)
		}
		return s.skipMember(k, chunkFields)
	})
	return ok && s.end()
}

// fieldsOf names a type decodeFast fills, for the JSON names of its
// fields.
type fieldsOf uint8

const (
	chunkFields fieldsOf = iota
	choiceFields
	deltaFields
	toolCallFields
	functionCallFields
	usageFields
	promptTokensDetailsFields
	completionTokensDetailsFields
)

// has reports whether name is the JSON name of one of the fields, as
// encoding/json matches keys to them (TestChunkFieldsAreKnown checks the
// names against the types).
func (f fieldsOf) has(name []byte) bool {
	switch f {
	case chunkFields:
		switch string(name) {
		case "id", "created", "model", "usage", "choices":
			return true
		}
	case choiceFields:
		switch string(name) {
		case "delta", "finish_reason":
			return true
		}
	case deltaFields:
		switch string(name) {
		case "content", "reasoning_content", "tool_calls":
			return true
		}
	case toolCallFields:
		switch string(name) {
		case "index", "id", "type", "function":
			return true
		}
	case functionCallFields:
		switch string(name) {
		case "name", "arguments":
			return true
		}
	case usageFields:
		switch string(name) {
		case "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details":
			return true
		}
	case promptTokensDetailsFields:
		switch string(name) {
		case "audio_tokens", "cached_tokens":
			return true
		}
	case completionTokensDetailsFields:
		switch string(name) {
		case "audio_tokens", "reasoning_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens":
			return true
		}
	}
	return false
}

// fieldSet is the fields of an object seen so far, by number: a key given
// twice is left to encoding/json (the last wins, and an object or an array
// is decoded into what the first left).
type fieldSet uint8

// first notes field i and reports whether it is the first time.
func (f *fieldSet) first(i uint) bool {
	if *f&(1<<i) != 0 {
		return false
	}
	*f |= 1 << i
	return true
}

// chunkScanner reads a chunk's JSON from b[i:]. Each method reads one
// thing, whitespace before it included, and reports false where the input
// is not what it reads: then decodeFast gives up.
type chunkScanner struct {
	b []byte
	i int
}

// maxSkipDepth is how deep an unknown value may nest before decodeFast
// leaves it to encoding/json (whose limit is 10000).
const maxSkipDepth = 32

// ws skips whitespace.
func (s *chunkScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after whitespace, 0 at the end.
func (s *chunkScanner) peek() byte {
	if s.i < len(s.b) && s.b[s.i] > ' ' { // most often no whitespace
		return s.b[s.i]
	}
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// end reports whether only whitespace is left.
func (s *chunkScanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// literal reads lit.
func (s *chunkScanner) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// null reads a null if one is next.
func (s *chunkScanner) null() bool {
	return s.peek() == 'n' && s.literal("null")
}

// openObject reads an object's '{'; more is whether a member follows.
func (s *chunkScanner) openObject() (more, ok bool) {
	return s.open('{', '}')
}

// nextMember reads what follows a member; more is whether another does.
func (s *chunkScanner) nextMember() (more, ok bool) {
	return s.next('}')
}

// openArray reads an array's '['; more is whether an element follows.
func (s *chunkScanner) openArray() (more, ok bool) {
	return s.open('[', ']')
}

// nextElement reads what follows an element; more is whether another does.
func (s *chunkScanner) nextElement() (more, ok bool) {
	return s.next(']')
}

func (s *chunkScanner) open(start, end byte) (more, ok bool) {
	if s.peek() != start {
		return false, false
	}
	s.i++
	if s.peek() == end {
		s.i++
		return false, true
	}
	return true, true
}

func (s *chunkScanner) next(end byte) (more, ok bool) {
	switch s.peek() {
	case ',':
		s.i++
		return true, true
	case end:
		s.i++
		return false, true
	}
	return false, false
}

// key reads a member's key and its ':'. Only a key of printable ASCII
// without escapes is read: a key in any other form might name a field
// (encoding/json unescapes keys, and folds "ſ" to "s" and "K" to "k").
func (s *chunkScanner) key() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			k := s.b[start:i]
			s.i = i + 1
			if s.peek() != ':' {
				return nil, false
			}
			s.i++
			return k, true
		case c < ' ' || c > '~' || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// skipMember skips the value of a member whose key k is none of the
// fields, as encoding/json does. A key that is one of them in any case
// (one in another case, or one the object's decoder does not read) is left
// to encoding/json, which matches keys to fields without regard to case.
func (s *chunkScanner) skipMember(k []byte, fields fieldsOf) bool {
	var lower [32]byte // longer than any field's name
	if len(k) <= len(lower) {
		for i, c := range k {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if fields.has(lower[:len(k)]) {
			return false
		}
	}
	return s.skipValue(0)
}

// object reads an object, calling member for each of its keys (the
// value's reader). member reads the fields of its type and skips the rest
// (skipMember); a false from it gives up on the whole chunk.
func (s *chunkScanner) object(member func(k []byte) bool) bool {
	more, ok := s.openObject()
	for ok && more {
		var k []byte
		if k, ok = s.key(); ok {
			ok = member(k)
		}
		if ok {
			more, ok = s.nextMember()
		}
	}
	return ok
}

// skipValue reads any JSON value and drops it.
func (s *chunkScanner) skipValue(depth int) bool {
	switch c := s.peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		if depth >= maxSkipDepth {
			return false
		}
		more, ok := s.openObject()
		for ok && more {
			ok = s.skipString() && s.peek() == ':'
			if ok {
				s.i++
				ok = s.skipValue(depth + 1)
			}
			if ok {
				more, ok = s.nextMember()
			}
		}
		return ok
	case c == '[':
		if depth >= maxSkipDepth {
			return false
		}
		more, ok := s.openArray()
		for ok && more {
			ok = s.skipValue(depth + 1)
			if ok {
				more, ok = s.nextElement()
			}
		}
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	}
	return false
}

// skipString reads a string (s.b[s.i] is its '"') and drops it.
func (s *chunkScanner) skipString() bool {
	if s.peek() != '"' {
		return false
	}
	for i := s.i + 1; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c < ' ':
			return false
		case c == '\\':
			if i+1 >= len(s.b) {
				return false
			}
			switch s.b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if hex4(s.b[i+2:]) < 0 {
					return false
				}
				i += 5
			default:
				return false
			}
		}
	}
	return false
}

// skipNumber reads a number as JSON writes it and drops it.
func (s *chunkScanner) skipNumber() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return false
		}
		i = j
	}
	s.i = i
	return true
}

// digits returns where the digits from b[i] end.
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// hex4 is the value of the four hex digits b begins with, -1 if it does
// not.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// integer64 reads an integer into *dst, or a null, which leaves it.
// encoding/json gets any other number: a fraction or an exponent is an
// error for an integer field, and so is a value out of its range.
func (s *chunkScanner) integer64(dst *int64) bool {
	if s.null() {
		return true
	}
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	end := digits(b, i)
	// 19 digits do not overflow a uint64.
	if end == start || end-start > 19 || b[start] == '0' && end-start > 1 {
		return false
	}
	var v uint64
	for _, c := range b[start:end] {
		v = v*10 + uint64(c-'0')
	}
	switch {
	case !neg && v <= math.MaxInt64:
		*dst = int64(v)
	case neg && v <= -math.MinInt64:
		*dst = int64(-v)
	default:
		return false
	}
	s.i = end
	return true
}

// integer reads an integer into *dst as integer64 does, if an int holds
// it.
func (s *chunkScanner) integer(dst *int) bool {
	v := int64(*dst)
	if !s.integer64(&v) || int64(int(v)) != v {
		return false
	}
	*dst = int(v)
	return true
}

// str reads a string into *dst, or a null, which leaves it. The string is
// known itself when equal to it, and is otherwise a copy. A string with
// invalid UTF-8 is left to encoding/json (which writes U+FFFD for it).
func (s *chunkScanner) str(dst *string, known string) bool {
	if s.peek() != '"' {
		return s.null()
	}
	b := s.b
	start := s.i + 1
	for i := start; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			if v := b[start:i]; string(v) == known {
				*dst = known
			} else {
				*dst = string(v)
			}
			s.i = i + 1
			return true
		case c == '\\':
			return s.unescape(dst, start, i)
		case c < ' ':
			return false
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			i += n
		}
	}
	return false
}

// unescape reads the rest of a string that has escapes, from its first
// escape at b[i], into *dst, decoding the escapes as encoding/json does: a
// \u escape of half a surrogate pair that is not followed by the other
// half is U+FFFD.
func (s *chunkScanner) unescape(dst *string, start, i int) bool {
	b := s.b
	// The string's end, to size the result: it is no longer than its JSON.
	end := i
	for end < len(b) && b[end] != '"' {
		if b[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(b) {
		return false
	}
	var out strings.Builder
	out.Grow(end - start)
	out.Write(b[start:i])
	for i < end {
		switch c := b[i]; {
		case c == '\\':
			var e byte
			switch b[i+1] {
			case '"', '\\', '/':
				e = b[i+1]
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			case 'u':
				r := hex4(b[i+2 : end])
				if r < 0 {
					return false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+1 < end && b[i] == '\\' && b[i+1] == 'u' {
						r2 = hex4(b[i+2 : end])
					}
					if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
						i += 6
					}
				}
				out.WriteRune(r)
				continue
			default:
				return false
			}
			out.WriteByte(e)
			i += 2
		case c < ' ':
			return false
		case c < utf8.RuneSelf:
			out.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRune(b[i:end])
			if r == utf8.RuneError && n == 1 {
				return false
			}
			out.Write(b[i : i+n])
			i += n
		}
	}
	*dst = out.String()
	s.i = end + 1
	return true
}

// choices reads a chunk's choices into *dst, in the array of reuse.
func (s *chunkScanner) choices(dst *[]streamChoice, reuse []streamChoice) bool {
	if s.null() {
		return true
	}
	more, ok := s.openArray()
	if !ok {
		return false
	}
	// An empty array is an empty slice, not nil, as from encoding/json.
	cs := reuse
	if cs == nil {
		cs = []streamChoice{}
	}
	for ok && more {
		cs = append(cs, streamChoice{})
		ok = s.choice(&cs[len(cs)-1])
		if ok {
			more, ok = s.nextElement()
		}
	}
	*dst = cs
	return ok
}

// choice reads a choice, or a null, which leaves it zero.
func (s *chunkScanner) choice(ch *streamChoice) bool {
	if s.null() {
		return true
	}
	var seen fieldSet
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "delta":
			return seen.first(0) && s.delta(&ch.Delta)
		case "finish_reason":
			return seen.first(1) && s.str((*string)(&ch.FinishReason), string(openai.FinishReasonStop))
		}
		return s.skipMember(k, choiceFields)
	})
	return ok
}

// delta reads a choice's delta, or a null, which leaves it zero.
func (s *chunkScanner) delta(d *streamDelta) bool {
	if s.null() {
		return true
	}
	var seen fieldSet
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "content":
			return seen.first(0) && s.str(&d.Content, "")
		case "reasoning_content":
			return seen.first(1) && s.str(&d.ReasoningContent, "")
		case "tool_calls":
			return seen.first(2) && s.toolCalls(&d.ToolCalls)
		}
		return s.skipMember(k, deltaFields)
	})
}

// toolCalls reads a delta's tool calls, or a null, which leaves them nil.
func (s *chunkScanner) toolCalls(dst *[]openai.ToolCall) bool {
	if s.null() {
		return true
	}
	more, ok := s.openArray()
	if !ok {
		return false
	}
	tcs := []openai.ToolCall{}
	for ok && more {
		tcs = append(tcs, openai.ToolCall{})
		ok = s.toolCall(&tcs[len(tcs)-1])
		if ok {
			more, ok = s.nextElement()
		}
	}
	*dst = tcs
	return ok
}

// toolCall reads a tool call delta, or a null, which leaves it zero.
func (s *chunkScanner) toolCall(tc *openai.ToolCall) bool {
	if s.null() {
		return true
	}
	var seen fieldSet
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "index":
			return seen.first(0) && s.index(&tc.Index)
		case "id":
			return seen.first(1) && s.str(&tc.ID, "")
		case "type":
			return seen.first(2) && s.str((*string)(&tc.Type), string(openai.ToolTypeFunction))
		case "function":
			return seen.first(3) && s.function(&tc.Function)
		}
		return s.skipMember(k, toolCallFields)
	})
}

// index reads a tool call's index, or a null, which leaves it nil.
func (s *chunkScanner) index(dst **int) bool {
	if s.null() {
		return true
	}
	var v int
	if !s.integer(&v) {
		return false
	}
	*dst = &v
	return true
}

// function reads a tool call's function, or a null, which leaves it zero.
func (s *chunkScanner) function(f *openai.FunctionCall) bool {
	if s.null() {
		return true
	}
	var seen fieldSet
	return s.object(func(k []byte) bool {
		switch string(k) {
		case "name":
			return seen.first(0) && s.str(&f.Name, "")
		case "arguments":
			return seen.first(1) && s.str(&f.Arguments, "")
		}
		return s.skipMember(k, functionCallFields)
	})
}

// usage reads a chunk's usage, or a null, which leaves it nil.
func (s *chunkScanner) usage(dst **openai.Usage) bool {
	if s.null() {
		return true
	}
	u := new(openai.Usage)
	var seen fieldSet
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "prompt_tokens":
			return seen.first(0) && s.integer(&u.PromptTokens)
		case "completion_tokens":
			return seen.first(1) && s.integer(&u.CompletionTokens)
		case "total_tokens":
			return seen.first(2) && s.integer(&u.TotalTokens)
		case "prompt_tokens_details":
			return seen.first(3) && s.promptTokensDetails(&u.PromptTokensDetails)
		case "completion_tokens_details":
			return seen.first(4) && s.completionTokensDetails(&u.CompletionTokensDetails)
		}
		return s.skipMember(k, usageFields)
	})
	*dst = u
	return ok
}

// promptTokensDetails reads a usage's prompt details, or a null, which
// leaves them nil.
func (s *chunkScanner) promptTokensDetails(dst **openai.PromptTokensDetails) bool {
	if s.null() {
		return true
	}
	d := new(openai.PromptTokensDetails)
	var seen fieldSet
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "audio_tokens":
			return seen.first(0) && s.integer(&d.AudioTokens)
		case "cached_tokens":
			return seen.first(1) && s.integer(&d.CachedTokens)
		}
		return s.skipMember(k, promptTokensDetailsFields)
	})
	*dst = d
	return ok
}

// completionTokensDetails reads a usage's completion details, or a null,
// which leaves them nil.
func (s *chunkScanner) completionTokensDetails(dst **openai.CompletionTokensDetails) bool {
	if s.null() {
		return true
	}
	d := new(openai.CompletionTokensDetails)
	var seen fieldSet
	ok := s.object(func(k []byte) bool {
		switch string(k) {
		case "audio_tokens":
			return seen.first(0) && s.integer(&d.AudioTokens)
		case "reasoning_tokens":
			return seen.first(1) && s.integer(&d.ReasoningTokens)
		case "accepted_prediction_tokens":
			return seen.first(2) && s.integer(&d.AcceptedPredictionTokens)
		case "rejected_prediction_tokens":
			return seen.first(3) && s.integer(&d.RejectedPredictionTokens)
		}
		return s.skipMember(k, completionTokensDetailsFields)
	})
	*dst = d
	return ok
}
