package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"
)

// The JSON-RPC 2.0 envelope and A2A's error codes.

// JSON-RPC and A2A error codes.
const (
	codeParseError              = -32700
	codeInvalidRequest          = -32600
	codeMethodNotFound          = -32601
	codeInvalidParams           = -32602
	codeInternal                = -32603
	codeTaskNotFound            = -32001
	codeTaskNotCancelable       = -32002
	codeUnsupportedOperation    = -32004
	codeContentTypeNotSupported = -32005
	codeVersionNotSupported     = -32009
	versionOutcome              = "version_not_supported"
	// versionHeader names the protocol version a client speaks.
	versionHeader               = "A2A-Version"
	jsonRPCVersion              = "2.0"
	problemsDataKey             = "errors"
	internalErrorMessage        = "internal error"
	unsupportedOperationOutcome = "unsupported_operation"
	taskNotFoundOutcome         = "task_not_found"
	invalidParamsOutcome        = "invalid_params"
	contentTypeOutcome          = "content_type_not_supported"
	taskNotCancelableOutcome    = "task_not_cancelable"
	methodNotFoundOutcome       = "method_not_found"
	invalidRequestOutcome       = "invalid_request"
	internalOutcome             = "internal"
	shutdownOutcome             = "server_shutting_down"
	parseErrorOutcome           = "parse_error"
	maxMethodBytes              = 128
	rpcContentTypeWithCharset   = "application/json; charset=utf-8"
	sseContentType              = "text/event-stream"
)

// rpcRequest is a JSON-RPC request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// rpcResponse is a JSON-RPC response: a result or an error.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object; outcome labels its metric.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	outcome string
}

func (e *rpcError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

func invalidParams(format string, args ...any) *rpcError {
	return &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf(format, args...), outcome: invalidParamsOutcome}
}

func unsupported(format string, args ...any) *rpcError {
	return &rpcError{Code: codeUnsupportedOperation, Message: fmt.Sprintf(format, args...), outcome: unsupportedOperationOutcome}
}

// shuttingDown is the error that ends a call or stream about a task
// because this replica is stopping: A2A's internal error (its temporary
// unavailability), saying that the task goes on, with the reason in a
// google.rpc.ErrorInfo as A2A's error details are. A stream that ended
// without it, or without a final status, would look finished to the
// client.
func shuttingDown(taskID string) *rpcError {
	return &rpcError{Code: codeInternal, outcome: shutdownOutcome,
		Message: fmt.Sprintf("the server is shutting down; task %q goes on: subscribe to it again (SubscribeToTask) or get it (GetTask)", taskID),
		Data: []map[string]any{{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVER_SHUTTING_DOWN",
			"domain": "agentd", "metadata": map[string]string{"taskId": taskID}}}}
}

func taskNotFound(id string) *rpcError {
	return &rpcError{Code: codeTaskNotFound, Message: fmt.Sprintf("task %q not found", id), outcome: taskNotFoundOutcome}
}

// problem is one entry of an invalid-params error's data: where in the
// chat request the value sent ended up, and what is wrong with it.
type problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// rpcErrorOf maps an error of the chat service to A2A's error; internal
// is true when it is ours (logged, answered without detail).
func rpcErrorOf(err error, taskID string) (e *rpcError, internal bool) {
	var re *rpcError
	var ve *spec.ValidationError
	var busy *chat.BusyError
	switch {
	case errors.As(err, &re):
		return re, false
	case errorsIsNotFound(err):
		return taskNotFound(taskID), false
	case errors.As(err, &ve):
		probs := make([]problem, len(ve.Problems))
		for i, p := range ve.Problems {
			probs[i] = problem{Path: p.Path, Message: p.Message}
		}
		e := invalidParams("the message cannot be run by the team: %d problem(s), see data.errors", len(probs))
		e.Data = map[string]any{problemsDataKey: probs}
		return e, false
	case errors.As(err, &busy):
		return unsupported("the context's chat is running another task; wait for it to end or cancel it"), false
	case errors.Is(err, chat.ErrNoPendingInput):
		return unsupported("the task is not waiting for input"), false
	case errors.Is(err, chat.ErrConflict):
		return invalidParams("this messageId was sent before with another message"), false
	case errors.Is(err, runtime.ErrStopped):
		return shuttingDown(taskID), false
	case errors.Is(err, runtime.ErrLogBroken):
		return unsupported("the context's chat cannot be run again: its log cannot be read"), false
	}
	return &rpcError{Code: codeInternal, Message: internalErrorMessage, outcome: internalOutcome}, true
}

// errorsIsNotFound reports a chat or team that is not the tenant's.
func errorsIsNotFound(err error) bool {
	return errors.Is(err, chat.ErrNotFound) || errors.Is(err, chat.ErrTeamNotFound)
}

// ServeRPC answers POST /a2a/{team}: one JSON-RPC request of a tenant for
// the agent of one of its saved teams.
func (h *Handler) ServeRPC(w http.ResponseWriter, r *http.Request, tenant, team string) {
	body, err := frontend.ReadBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		msg := "the request body cannot be read"
		if frontend.TooLarge(err) {
			msg = fmt.Sprintf("the request body is larger than %d bytes", h.cfg.MaxBodyBytes)
		}
		h.answer(w, r, "", nil, nil, &rpcError{Code: codeInvalidRequest, Message: msg, outcome: invalidRequestOutcome})
		return
	}
	if !json.Valid(body) {
		h.answer(w, r, "", nil, nil, &rpcError{Code: codeParseError, Message: "the body is not JSON", outcome: parseErrorOutcome})
		return
	}
	var req rpcRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		// Valid JSON, but no request object: a batch (which A2A does not
		// use), or a request whose members have the wrong types.
		h.answer(w, r, "", nil, nil, &rpcError{Code: codeInvalidRequest, Message: "the body must be one JSON-RPC request object", outcome: invalidRequestOutcome})
		return
	}
	if req.JSONRPC != jsonRPCVersion || req.Method == "" || len(req.Method) > maxMethodBytes {
		h.answer(w, r, "", req.ID, nil, &rpcError{Code: codeInvalidRequest, Message: `a JSON-RPC 2.0 request needs "jsonrpc": "2.0" and a method`, outcome: invalidRequestOutcome})
		return
	}
	if v := r.Header.Get(versionHeader); v != "" && v != protocolVersion && !strings.HasPrefix(v, "1.") && v != "1" {
		h.answer(w, r, req.Method, req.ID, nil, &rpcError{Code: codeVersionNotSupported,
			Message: fmt.Sprintf("A2A version %q is not served: this agent speaks %s", v, protocolVersion), outcome: versionOutcome})
		return
	}
	c := &call{h: h, w: w, r: r, tenant: tenant, team: team, id: req.ID, method: req.Method}
	switch req.Method {
	case methodSendMessage:
		c.sendMessage(req.Params, false)
	case methodSendStreamingMessage:
		c.sendMessage(req.Params, true)
	case methodGetTask:
		c.getTask(req.Params)
	case methodCancelTask:
		c.cancelTask(req.Params)
	case methodSubscribeToTask:
		c.subscribe(req.Params)
	case methodCreatePushConfig, methodGetPushConfig, methodListPushConfigs, methodDeletePushConfig:
		c.pushConfig(req.Method, req.Params)
	default:
		h.answer(w, r, "", req.ID, nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q is not served", req.Method), outcome: methodNotFoundOutcome})
	}
}

// answer writes a JSON-RPC response (a result or an error) and counts it.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, method string, id json.RawMessage, result any, e *rpcError) {
	label := method
	if label == "" {
		label = "invalid"
	}
	resp := rpcResponse{JSONRPC: jsonRPCVersion, ID: nullIfEmpty(id), Result: result, Error: e}
	if e != nil {
		h.metrics.calls.WithLabelValues(label, e.outcome).Inc()
	} else {
		h.metrics.calls.WithLabelValues(label, "ok").Inc()
	}
	b, err := json.Marshal(resp)
	if err != nil {
		h.log.Error("a2a: encode response", "method", method, "error", err)
		b, _ = json.Marshal(rpcResponse{JSONRPC: jsonRPCVersion, ID: nullIfEmpty(id), Error: &rpcError{Code: codeInternal, Message: internalErrorMessage}})
	}
	w.Header().Set("Content-Type", rpcContentTypeWithCharset)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func nullIfEmpty(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// decodeParams reads a method's params into v.
func decodeParams(raw json.RawMessage, v any) *rpcError {
	if len(raw) == 0 || string(raw) == "null" {
		return invalidParams("params are required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParams("params: %v", err)
	}
	return nil
}
