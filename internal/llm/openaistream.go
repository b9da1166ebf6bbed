package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/jsonstr"
)

// A streamed chat completion is the call a chat waiting on its model makes
// most, once per reply, and go-openai's encoding and reading of it cost
// more than the rest of a turn together (BenchmarkOpenAIStreamedReply): its
// message type encodes itself through a MarshalJSON whose output
// encoding/json then checks and compacts a second time, and its stream
// reader runs two regular expressions over every line and decodes each
// chunk into its full response type. So the openai kind's streamed calls
// are sent and read here, with go-openai's request type (buildRequest
// fills it as for any call) and its error types (what the retry policy and
// the error messages read): the body is the bytes go-openai would have
// sent (TestChatRequestEncodesAsGoOpenAIDoes), and the stream is read as
// go-openai reads it, error chunks and error bodies included. Azure's
// streamed calls still go through go-openai (its URLs name a deployment),
// and are decoded with the same chunk type.

// streamChunk is the part of a chat.completion.chunk that a reply is put
// together from. Its decode (chunkdecode.go) reads the fields of its types
// itself: TestChunkFieldsAreKnown fails on a field added to them until
// decode reads it too.
type streamChunk struct {
	ID      string         `json:"id"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Usage   *openai.Usage  `json:"usage"`
	Choices []streamChoice `json:"choices"`
}

// streamChoice is a choice of a chunk: what its delta adds to the reply.
type streamChoice struct {
	Delta        streamDelta         `json:"delta"`
	FinishReason openai.FinishReason `json:"finish_reason"`
}

// streamDelta is what a chunk adds to a choice's message.
type streamDelta struct {
	Content          string            `json:"content"`
	ReasoningContent string            `json:"reasoning_content"`
	ToolCalls        []openai.ToolCall `json:"tool_calls"`
}

// chunkSource yields a stream's chunks as JSON, and io.EOF after the last;
// close lets go of the stream.
type chunkSource interface {
	next() ([]byte, error)
	close() error
}

// goOpenAIChunks reads a go-openai stream's chunks undecoded.
type goOpenAIChunks struct{ s *openai.ChatCompletionStream }

func (g goOpenAIChunks) next() ([]byte, error) { return g.s.RecvRaw() }
func (g goOpenAIChunks) close() error          { return g.s.Close() }

// encodeStreamBody returns the body of req's streamed call: the bytes
// go-openai sends for the request buildRequest makes of it, with Stream
// and the usage asked for. go-openai refuses what reasoning models do not
// take before sending; so does this.
func encodeStreamBody(req *chat.ModelRequest) ([]byte, error) {
	creq, errs := buildOptions(req)
	if err := errors.Join(errs...); err != nil {
		return nil, err // checked by prepare: not expected
	}
	streamed(&creq)
	if err := openai.NewReasoningValidator().Validate(creq); err != nil {
		return nil, err
	}
	msgs, hint := req.Messages, 0
	for i := range msgs {
		hint += len(msgs[i].Content) + 64
	}
	return encodeChatRequest(&creq, len(msgs), hint, func(i int) (openai.ChatCompletionMessage, error) {
		om, err := convertMessage(msgs[i])
		if err != nil {
			return om, fmt.Errorf("message %d: %w", i, err)
		}
		return om, nil
	})
}

// encodeChatRequest returns the body go-openai sends for creq with n
// messages, message(i) the ith; creq's own Messages are not read. Each
// message is made and encoded in turn, so the history is not held twice
// over; hint is about the size of their JSON.
//
// The request without its messages is encoded by encoding/json as
// go-openai does (its options and tools, once a call), and the messages,
// where a long history costs, by appendMessage into the same buffer; they
// go where go-openai puts them, right after the model. Should a go-openai
// release write its fields in another order, the whole request is encoded
// the slow way.
func encodeChatRequest(creq *openai.ChatCompletionRequest, n, hint int, message func(int) (openai.ChatCompletionMessage, error)) ([]byte, error) {
	rest := *creq
	rest.Messages = nil
	body, err := json.Marshal(&rest)
	if err != nil {
		return nil, err
	}
	head := jsonstr.Append([]byte(`{"model":`), creq.Model)
	head = append(head, `,"messages":`...)
	if !bytes.HasPrefix(body, append(head, "null"...)) {
		rest.Messages = make([]openai.ChatCompletionMessage, n)
		for i := range n {
			if rest.Messages[i], err = message(i); err != nil {
				return nil, err
			}
		}
		return json.Marshal(&rest)
	}
	size := len(body) + hint
	out := make([]byte, 0, size+size/8)
	out = append(out, head...)
	out = append(out, '[')
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		m, err := message(i)
		if err != nil {
			return nil, err
		}
		if out, err = appendMessage(out, &m); err != nil {
			return nil, err
		}
	}
	out = append(out, ']')
	return append(out, body[len(head)+len("null"):]...), nil
}

// appendMessage appends m as go-openai's MarshalJSON writes it: its fields
// in the type's order, the empty ones left out, Content a string or, for a
// message with images, the parts. encoding/json went through reflection
// for each field of each message of the history on every call, at twice
// the cost of the strings' own escaping; here only the rare structured
// fields (tool calls, a function call, image parts) still go through it.
func appendMessage(out []byte, m *openai.ChatCompletionMessage) ([]byte, error) {
	if m.Content != "" && m.MultiContent != nil {
		return nil, openai.ErrContentFieldsMisused
	}
	out = jsonstr.Append(append(out, `{"role":`...), m.Role)
	var err error
	switch {
	case len(m.MultiContent) > 0:
		if out, err = appendJSON(append(out, `,"content":`...), m.MultiContent); err != nil {
			return nil, err
		}
	case m.Content != "":
		out = jsonstr.Append(append(out, `,"content":`...), m.Content)
	}
	out = appendField(out, `,"refusal":`, m.Refusal)
	out = appendField(out, `,"name":`, m.Name)
	out = appendField(out, `,"reasoning_content":`, m.ReasoningContent)
	if m.FunctionCall != nil {
		if out, err = appendJSON(append(out, `,"function_call":`...), m.FunctionCall); err != nil {
			return nil, err
		}
	}
	if len(m.ToolCalls) > 0 {
		if out, err = appendJSON(append(out, `,"tool_calls":`...), m.ToolCalls); err != nil {
			return nil, err
		}
	}
	out = appendField(out, `,"tool_call_id":`, m.ToolCallID)
	return append(out, '}'), nil
}

// appendField appends a string field that is left out when empty.
func appendField(out []byte, key, v string) []byte {
	if v == "" {
		return out
	}
	return jsonstr.Append(append(out, key...), v)
}

// appendJSON appends v as encoding/json encodes it.
func appendJSON(out []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(out, b...), err
}

// openChatStream sends the streamed chat completion of call to an openai
// endpoint and returns its event stream. A status of 400 or more is the
// error go-openai returns for it.
//
// A chat waits for the response's headers under this frame, so the
// request is made in a frame of its own (chatRequest).
func (o *openAIWire) openChatStream(ctx context.Context, call *chat.ModelRequest) (*sseChunks, error) {
	req, err := o.chatRequest(ctx, call)
	if err != nil {
		return nil, err
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		return nil, err
	}
	return streamOf(resp)
}

// streamOf is the event stream of a response, or the error of a status of
// 400 or more, as go-openai makes it.
//
//go:noinline
func streamOf(resp *http.Response) (*sseChunks, error) {
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		return nil, errorResponse(resp)
	}
	return &sseChunks{body: resp.Body, r: bufio.NewReaderSize(resp.Body, sseBuffer)}, nil
}

// chatRequest is the HTTP request of call's streamed chat completion.
//
//go:noinline
func (o *openAIWire) chatRequest(ctx context.Context, call *chat.ModelRequest) (*http.Request, error) {
	body, err := encodeStreamBody(call)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.chatURL, nil)
	if err != nil {
		return nil, err
	}
	// The body lets go of its bytes once sent (see releasingBody); one that
	// net/http must send again (a connection that went away before the
	// server took the request) is encoded again from the call.
	req.Body, req.ContentLength = newReleasingBody(body), int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return streamBody(call) }
	if o.ep.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.ep.APIKey)
	}
	if o.ep.Organization != "" {
		req.Header.Set("OpenAI-Organization", o.ep.Organization)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	req.Header.Set("Connection", "keep-alive")
	return req, nil
}

// streamBody encodes the body of req's streamed call again, as chatRequest
// sends it.
func streamBody(req *chat.ModelRequest) (io.ReadCloser, error) {
	body, err := encodeStreamBody(req)
	if err != nil {
		return nil, err
	}
	return newReleasingBody(body), nil
}

// errorResponse is the error of a failed call, as go-openai makes it: the
// API's error object (*openai.APIError) with the status, or a
// *openai.RequestError with the body when it has none.
func errorResponse(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return fmt.Errorf("error, reading response body: %w", err)
	}
	var er openai.ErrorResponse
	err = json.Unmarshal(body, &er)
	if err != nil || er.Error == nil {
		re := &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: err, Body: body}
		if er.Error != nil {
			re.Err = er.Error
		}
		return re
	}
	er.Error.HTTPStatus, er.Error.HTTPStatusCode = resp.Status, resp.StatusCode
	return er.Error
}

// Limits of what a stream may send besides its chunks.
const (
	// maxErrorBody caps an error body read (go-openai reads it whole).
	maxErrorBody = 1 << 20
	// maxEventLine caps one line of the event stream.
	maxEventLine = 16 << 20
	// sseBuffer is the read buffer of a stream, kept by a chat for as
	// long as it waits in the reply: a chunk of a token is a line of
	// about 200 bytes, and a longer line is read in parts.
	sseBuffer = 512
	// maxNonData is how many lines other than data may come in a row, as
	// go-openai's default EmptyMessagesLimit.
	maxNonData = 300
)

// sseChunks reads the chunks of a chat-completions event stream: each
// "data:" line is a chunk until "data: [DONE]". What else a stream holds is
// kept (up to maxErrorBody), since a server that fails after its 200 may
// send its error as a body of its own (go-openai reads that as the error),
// or as a data line that is an error object.
type sseChunks struct {
	body    io.ReadCloser
	r       *bufio.Reader
	line    []byte // a line longer than the reader's buffer
	other   []byte // what came that is not a chunk
	dataErr bool   // the data line read is an error object
}

func (s *sseChunks) close() error { return s.body.Close() }

// next returns the next chunk; io.EOF at [DONE] or at the end of the body.
func (s *sseChunks) next() ([]byte, error) {
	for nonData := 0; ; {
		line, readErr := s.readLine()
		if readErr != nil || s.dataErr {
			if err := s.otherError(); err != nil {
				return nil, err
			}
			return nil, readErr
		}
		line = bytes.TrimSpace(line)
		payload, ok := bytes.CutPrefix(line, []byte("data:"))
		if ok {
			payload = bytes.TrimLeft(payload, " \t\r\n\v\f")
			if bytes.HasPrefix(payload, []byte(`{"error":`)) {
				s.dataErr = true
				s.keep(payload)
				continue
			}
			if string(payload) == "[DONE]" {
				return nil, io.EOF
			}
			return payload, nil
		}
		s.keep(line)
		if nonData++; nonData > maxNonData {
			return nil, openai.ErrTooManyEmptyStreamMessages
		}
	}
}

// readLine returns the next line, its newline included.
func (s *sseChunks) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	s.line = append(s.line[:0], line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(s.line) > maxEventLine {
			return nil, fmt.Errorf("an event stream line over %d bytes", maxEventLine)
		}
		line, err = s.r.ReadSlice('\n')
		s.line = append(s.line, line...)
	}
	return s.line, err
}

// keep notes a line that is not a chunk.
func (s *sseChunks) keep(b []byte) {
	if len(s.other)+len(b) <= maxErrorBody {
		s.other = append(s.other, b...)
	}
}

// otherError is the API error in what the stream held besides its chunks,
// as go-openai wraps it; nil if there is none.
func (s *sseChunks) otherError() error {
	if len(s.other) == 0 {
		return nil
	}
	var er openai.ErrorResponse
	if json.Unmarshal(s.other, &er) != nil || er.Error == nil {
		return nil
	}
	return fmt.Errorf("error, %w", er.Error)
}
