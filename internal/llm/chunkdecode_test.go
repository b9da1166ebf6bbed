package llm

import (
	"bytes"
	"encoding"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// Chunks as the servers send them, in one line each.
const (
	openAIRoleChunk    = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"b5Yh9ws"}`
	openAIContentChunk = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" Paris"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Q2x"}`
	openAIFinishChunk  = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":"mK1hT"}`
	openAIUsageChunk   = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"3s"}`
	openAIToolCallHead = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`
	openAIToolCallArgs = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`
	openAIToolCallEnd  = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`

	azureFilterChunk  = `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}`
	azureContentChunk = `{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}},"delta":{"content":"Hello"},"finish_reason":null,"index":0,"logprobs":null}],"created":1741570283,"id":"chatcmpl-B9MHE4xkxzQnWmZ0rCQqHa9VJ2Y3x","model":"gpt-4o-2024-05-13","object":"chat.completion.chunk","system_fingerprint":"fp_67802d9a6d"}`
	azureFinishChunk  = `{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1741570283,"id":"chatcmpl-B9MHE4xkxzQnWmZ0rCQqHa9VJ2Y3x","model":"gpt-4o-2024-05-13","object":"chat.completion.chunk","system_fingerprint":"fp_67802d9a6d"}`

	vLLMRoleChunk      = `{"id":"chatcmpl-8f3e2a1b0c9d4e5f","object":"chat.completion.chunk","created":1741570283,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
	vLLMReasoningChunk = `{"id":"chatcmpl-8f3e2a1b0c9d4e5f","object":"chat.completion.chunk","created":1741570283,"model":"Qwen/QwQ-32B","choices":[{"index":0,"delta":{"reasoning_content":" Let me think"},"logprobs":null,"finish_reason":null}]}`
	vLLMFinishChunk    = `{"id":"chatcmpl-8f3e2a1b0c9d4e5f","object":"chat.completion.chunk","created":1741570283,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}`
	vLLMUsageChunk     = `{"id":"chatcmpl-8f3e2a1b0c9d4e5f","object":"chat.completion.chunk","created":1741570283,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{"prompt_tokens":10,"total_tokens":20,"completion_tokens":10,"prompt_tokens_details":null}}`

	ollamaContentChunk = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`
	ollamaFinishChunk  = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`
	ollamaUsageChunk   = `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1741570283,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":26,"completion_tokens":10,"total_tokens":36}}`

	llamaCppContentChunk = `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" world"}}],"created":1741570283,"id":"chatcmpl-tq3bGs3a9Zqk8JeZbWsbBn4fKPGq1rFb","model":"gpt-3.5-turbo","system_fingerprint":"b4869-8fcb5636","object":"chat.completion.chunk"}`
	llamaCppFinishChunk  = `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1741570283,"id":"chatcmpl-tq3bGs3a9Zqk8JeZbWsbBn4fKPGq1rFb","model":"gpt-3.5-turbo","system_fingerprint":"b4869-8fcb5636","object":"chat.completion.chunk","usage":{"completion_tokens":10,"prompt_tokens":5,"total_tokens":15},"timings":{"prompt_n":5,"prompt_ms":12.503,"prompt_per_token_ms":2.5006,"prompt_per_second":399.904,"predicted_n":10,"predicted_ms":100.12,"predicted_per_token_ms":10.012,"predicted_per_second":99.88}}`
)

// realChunks are chunks the servers send that decodeFast decodes itself.
var realChunks = map[string]string{
	"openai role":       openAIRoleChunk,
	"openai content":    openAIContentChunk,
	"openai finish":     openAIFinishChunk,
	"openai usage":      openAIUsageChunk,
	"openai tool call":  openAIToolCallHead,
	"openai tool args":  openAIToolCallArgs,
	"openai tool end":   openAIToolCallEnd,
	"azure filter":      azureFilterChunk,
	"azure content":     azureContentChunk,
	"azure finish":      azureFinishChunk,
	"vllm role":         vLLMRoleChunk,
	"vllm reasoning":    vLLMReasoningChunk,
	"vllm finish":       vLLMFinishChunk,
	"vllm usage":        vLLMUsageChunk,
	"ollama content":    ollamaContentChunk,
	"ollama finish":     ollamaFinishChunk,
	"ollama usage":      ollamaUsageChunk,
	"llama.cpp content": llamaCppContentChunk,
	"llama.cpp finish":  llamaCppFinishChunk,
}

// oddChunks are inputs encoding/json decodes in ways of its own, or
// refuses: decodeFast must leave every one of them to it.
var oddChunks = map[string]string{
	"empty":                   ``,
	"null":                    `null`,
	"array":                   `[]`,
	"truncated":               `{"id":"c","choices":[{"delta":{"content":"hi"`,
	"truncated string":        `{"id":"c`,
	"trailing garbage":        `{"id":"c"}x`,
	"two values":              `{"id":"c"}{"id":"d"}`,
	"trailing comma":          `{"id":"c",}`,
	"case variant key":        `{"ID":"c"}`,
	"case variant nested key": `{"choices":[{"delta":{"Content":"hi"}}]}`,
	"escaped key":             `{"\u0069d":"c"}`,
	"non-ASCII key":           `{"ſ":1}`,
	"kelvin key":              `{"choices":[{"delta":{"tool_calls":[{"\u212aindex":1}]}}]}`,
	"fraction":                `{"created":1.0}`,
	"exponent":                `{"created":1e3}`,
	"overflow":                `{"created":99999999999999999999}`,
	"leading zero":            `{"created":01}`,
	"string for int":          `{"created":"1"}`,
	"int for string":          `{"id":1}`,
	"object for array":        `{"choices":{}}`,
	"bool for string":         `{"choices":[{"delta":{"content":true}}]}`,
	"invalid UTF-8":           "{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
	"raw control character":   "{\"choices\":[{\"delta\":{\"content\":\"a\nb\"}}]}",
	"bad escape":              `{"id":"\x41"}`,
	"short unicode escape":    `{"id":"\u12"}`,
	"duplicate choices":       `{"choices":[{"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
	"duplicate delta":         `{"choices":[{"delta":{"content":"a"},"delta":{"reasoning_content":"b"}}]}`,
	"duplicate usage":         `{"usage":{"prompt_tokens":1},"usage":{"total_tokens":2}}`,
	"duplicate id":            `{"id":"a","id":"b"}`,
	"deep unknown value":      `{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	"bad unknown number":      `{"x":1.}`,
	"bad literal":             `{"choices":[{"delta":{"content":nul}}]}`,
}

// TestChunkDecodeFast checks that the chunks of real streams are decoded
// in one pass, and that the inputs encoding/json has its own ways with are
// left to it.
func TestChunkDecodeFast(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, raw string, fast bool) {
		t.Helper()
		var c streamChunk
		if got := c.decodeFast([]byte(raw)); got != fast {
			t.Errorf("decodeFast(%s) = %v, want %v", raw, got, fast)
		}
		checkChunkDecode(t, []byte(raw))
	}
	for name, raw := range realChunks {
		t.Run(name, func(t *testing.T) { check(t, raw, true) })
	}
	for name, raw := range oddChunks {
		t.Run(name, func(t *testing.T) { check(t, raw, false) })
	}
	// The benchmark's chunks.
	for line := range strings.SplitSeq(string(streamedReply(3)), "\n") {
		if raw, ok := strings.CutPrefix(line, "data: {"); ok {
			check(t, "{"+raw, true)
		}
	}
}

// TestChunkDecodeValues checks what the chunks of a stream decode to.
func TestChunkDecodeValues(t *testing.T) {
	t.Parallel()
	zero, two := 0, 2
	for _, tc := range []struct {
		raw  string
		want streamChunk
	}{
		{openAIRoleChunk, streamChunk{ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Created: 1741570283, Model: "gpt-4o-2024-08-06",
			Choices: []streamChoice{{}}}},
		{openAIUsageChunk, streamChunk{ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Created: 1741570283, Model: "gpt-4o-2024-08-06",
			Choices: []streamChoice{}, Usage: &openai.Usage{PromptTokens: 19, CompletionTokens: 10, TotalTokens: 29,
				PromptTokensDetails: &openai.PromptTokensDetails{}, CompletionTokensDetails: &openai.CompletionTokensDetails{}}}},
		{openAIToolCallHead, streamChunk{ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Created: 1741570283, Model: "gpt-4o-2024-08-06",
			Choices: []streamChoice{{Delta: streamDelta{ToolCalls: []openai.ToolCall{{Index: &zero, ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA",
				Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: "get_weather"}}}}}}}},
		{` { "choices" : [ { "delta" : { "content" : "a\n\"\\\/\b\f\r\t\u00e9\ud83d\ude00\ud800\u2028é😀" , "tool_calls" : [ null , { "index" : 2 } ] } , "finish_reason" : "length" } , null ] , "created" : -7 } `,
			streamChunk{Created: -7, Choices: []streamChoice{{Delta: streamDelta{Content: "a\n\"\\/\b\f\r\té😀\ufffd\u2028é😀",
				ToolCalls: []openai.ToolCall{{}, {Index: &two}}}, FinishReason: openai.FinishReasonLength}, {}}}},
	} {
		var c streamChunk
		if !c.decodeFast([]byte(tc.raw)) {
			t.Errorf("decodeFast(%s) = false", tc.raw)
			continue
		}
		if !reflect.DeepEqual(c, tc.want) {
			t.Errorf("decodeFast(%s):\n got %+v\nwant %+v", tc.raw, c, tc.want)
		}
		checkChunkDecode(t, []byte(tc.raw))
	}
}

// TestChunkDecodeRandomChunks checks that random chunks, as encoding/json
// writes them and indented, are decoded in one pass to what encoding/json
// decodes: every field set or not, strings with what encoding/json writes
// as escapes.
func TestChunkDecodeRandomChunks(t *testing.T) {
	t.Parallel()
	runes := []rune("ab Z09_{}[]:,<>&\"\\/\n\t\r\b\f\x00\x1f\x7fé日😀\u2028\u2029\ufffd\ufeff")
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 17))
		str := func() string {
			var b strings.Builder
			for range r.IntN(12) {
				b.WriteRune(runes[r.IntN(len(runes))])
			}
			return b.String()
		}
		num := func() int { return r.IntN(1 << 20) }
		c := streamChunk{ID: str(), Created: r.Int64() - r.Int64(), Model: str()}
		if r.IntN(3) == 0 {
			c.Usage = &openai.Usage{PromptTokens: num(), CompletionTokens: num(), TotalTokens: num()}
			if r.IntN(2) == 0 {
				c.Usage.PromptTokensDetails = &openai.PromptTokensDetails{AudioTokens: num(), CachedTokens: num()}
				c.Usage.CompletionTokensDetails = &openai.CompletionTokensDetails{AudioTokens: num(), ReasoningTokens: num(),
					AcceptedPredictionTokens: num(), RejectedPredictionTokens: -num()}
			}
		}
		if r.IntN(5) > 0 {
			c.Choices = make([]streamChoice, r.IntN(3))
		}
		for i := range c.Choices {
			ch := &c.Choices[i]
			ch.Delta.Content, ch.Delta.ReasoningContent = str(), str()
			// FinishReason writes itself without escapes, and "" as null.
			ch.FinishReason = []openai.FinishReason{"", openai.FinishReasonStop, openai.FinishReasonToolCalls, "other"}[r.IntN(4)]
			if r.IntN(2) == 0 {
				ch.Delta.ToolCalls = make([]openai.ToolCall, r.IntN(3))
			}
			for j := range ch.Delta.ToolCalls {
				tc := &ch.Delta.ToolCalls[j]
				if r.IntN(2) == 0 {
					tc.Index = new(r.IntN(4))
				}
				tc.ID, tc.Type, tc.Function = str(), openai.ToolType(str()), openai.FunctionCall{Name: str(), Arguments: str()}
			}
		}
		raw, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, raw, "\r\n", "\t "); err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{raw, indented.Bytes()} {
			var got streamChunk
			if !got.decodeFast(raw) {
				t.Fatalf("decodeFast(%s) = false", raw)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("decodeFast(%s):\n got %+v\nwant %+v", raw, got, c)
			}
			checkChunkDecode(t, raw)
		}
	}
}

// TestChunkFieldsAreKnown checks that decodeFast knows every field encoding/json
// decodes a chunk's keys into, so that no key it skips is one encoding/json
// would have decoded: a field added to streamChunk, or to go-openai's types
// of a later release, must be added to decodeFast too. And none of the
// types may decode itself.
func TestChunkFieldsAreKnown(t *testing.T) {
	t.Parallel()
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler := reflect.TypeFor[encoding.TextUnmarshaler]()
	for _, tc := range []struct {
		typ    reflect.Type
		fields fieldsOf
	}{
		{reflect.TypeFor[streamChunk](), chunkFields},
		{reflect.TypeFor[streamChoice](), choiceFields},
		{reflect.TypeFor[streamDelta](), deltaFields},
		{reflect.TypeFor[openai.ToolCall](), toolCallFields},
		{reflect.TypeFor[openai.FunctionCall](), functionCallFields},
		{reflect.TypeFor[openai.Usage](), usageFields},
		{reflect.TypeFor[openai.PromptTokensDetails](), promptTokensDetailsFields},
		{reflect.TypeFor[openai.CompletionTokensDetails](), completionTokensDetailsFields},
	} {
		for f := range tc.typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || f.Anonymous || !f.IsExported() {
				t.Errorf("%s.%s: decodeFast takes every field to have a name of its own", tc.typ, f.Name)
				continue
			}
			if !tc.fields.has([]byte(name)) {
				t.Errorf("%s.%s: %q is no field to decodeFast", tc.typ, f.Name, name)
			}
			for ft := f.Type; ; ft = ft.Elem() {
				if p := reflect.PointerTo(ft); p.Implements(unmarshaler) || p.Implements(textUnmarshaler) {
					t.Errorf("%s.%s: %s decodes itself", tc.typ, f.Name, ft)
				}
				if k := ft.Kind(); k != reflect.Pointer && k != reflect.Slice {
					break
				}
			}
		}
	}
}

// FuzzStreamChunk checks decode against encoding/json: for every input,
// the chunk it decodes and the error it returns are encoding/json's, into
// a fresh chunk and into one that held another, and none of its strings
// is the input's memory.
func FuzzStreamChunk(f *testing.F) {
	for _, raw := range realChunks {
		f.Add([]byte(raw))
	}
	for _, raw := range oddChunks {
		f.Add([]byte(raw))
	}
	for _, raw := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word1"},"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":"line\nbreak \"quoted\" back\\slash \/ \b\f\r\t"}}]}`,
		`{"choices":[{"delta":{"content":"caf\u00e9 \ud83d\ude00 \u2028 \u0000"}}]}`,
		`{"choices":[{"delta":{"content":"lone \ud800 high, \udc00 low, \ud800\u0041 high then not low, \ud800\ud800\udc00 two highs"}}]}`,
		`{"choices":[{"delta":{"content":"\uD83D\uDE00 \uDBFF\uDFFF \uFFFD \uFEFF"}}]}`,
		`{"choices":[{"delta":{"content":"日本語 ünïcødé 😀 ` + "\u2028\u2029" + `"}}]}`,
		"{\"choices\":[{\"delta\":{\"content\":\"\xed\xa0\x80 surrogate in UTF-8\"}}]}",
		"{\"choices\":[{\"delta\":{\"content\":\"\xe6\x97 truncated rune\"}}]}",
		"{\"choices\":[{\"delta\":{\"content\":\"\\n\xff after an escape\"}}]}",
		"{\"object\":\"\xff in a skipped value\",\"choices\":[]}",
		`{"id":null,"created":null,"model":null,"usage":null,"choices":null}`,
		`{"choices":[null,{"delta":null,"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":null,"reasoning_content":null,"tool_calls":null,"refusal":null,"role":null}}]}`,
		`{"choices":[{"delta":{"refusal":"I can't help with that."}}]}`,
		`{"usage":{"prompt_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":null}}`,
		`{"usage":{"prompt_tokens":1,"Prompt_Tokens":2}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":5,"CACHED_TOKENS":6}}}`,
		`{"usage":{"completion_tokens_details":{"reasoning_tokens":7,"unknown":{"a":[1,2,{"b":null}]}}}}`,
		`{"x":{"y":[true,false,null,-1.5e+10,0,"s\u0041\n"]},"id":"after"}`,
		`{"x":{}, "y":[], "z":""}`,
		`{"created":-1}`,
		`{"created":-0}`,
		`{"created":123456789012345678}`,
		`{"created":1234567890123456789}`,
		`{"created":9223372036854775807}`,
		`{"created":9223372036854775808}`,
		`{"created":-9223372036854775808}`,
		`{"usage":{"total_tokens":2147483648}}`,
		`{"created":1E3}`,
		`{"created":-}`,
		`{"created":1,}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"run","arguments":"{\"code\": \"print(1)\\n\"}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}},{"index":2,"id":"call_3","type":"function","function":{"name":"b","arguments":""}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":null,"id":null,"type":null,"function":null}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":1.5}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"index":1}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","name":"b"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"Name":"a"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[]}}]}`,
		`{"choices":[{"delta":{"tool_calls":{}}}]}`,
		`{"choices":[{"delta":{"function_call":{"name":"legacy","arguments":"{}"}}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}},{"index":2,"delta":{"content":"c"}}]}`,
		`{"choices":[{"delta":{"content":"a","content":"b"}}]}`,
		`{"choices":[{"finish_reason":"stop","finish_reason":null}]}`,
		`{"choices":[{"logprobs":{"content":[{"token":"Hi","logprob":-0.31725305,"bytes":[72,105],"top_logprobs":[]}]}}]}`,
		`{"choices":[{"Delta":{"content":"x"}}]}`,
		`{"CHOICES":[]}`,
		`{"model":"m","Model":"n"}`,
		`{"error":{"message":"boom","type":"server_error"}}`,
		" \t\r\n{\"id\"\n:\r\"c\"\t,\"choices\" : [ ] } \n",
		"{\"id\":\"c\"}\x00",
		`{"id":"c"} `,
		`{"id":"c"`,
		`{"id":`,
		`{"id"`,
		`{`,
		`{}`,
		`{"":1}`,
		`{"a b~":1}`,
		`{"choices":[{"delta":{"content":"hi"}}]}]`,
		`{"choices":[{"delta":{"content":"hi"}},]}`,
		`{"choices":[,]}`,
		`{"id":"\/\/"}`,
		`{"id":"\'"}`,
		`{"id":"\u00"}`,
		`{"id":"\uZZZZ"}`,
		`{"id":"\ud800\uZZZZ"}`,
		`{"id":"\ud800\u"}`,
		`{"id":"\ud800\`,
		`{"x":"\ud800\`,
		`{"x":tru}`,
		`{"x":-01}`,
		`{"x":1.5e}`,
		`{"x":.5}`,
		`{"x":[1,]}`,
	} {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkChunkDecode(t, raw)
	})
}

// checkChunkDecode checks that decode gives for raw what encoding/json
// gives.
func checkChunkDecode(t *testing.T, raw []byte) {
	t.Helper()
	var want streamChunk
	wantErr := json.Unmarshal(raw, &want)

	in := append([]byte(nil), raw...)
	check := func(what string, c *streamChunk, err error) {
		t.Helper()
		if (err == nil) != (wantErr == nil) || err != nil && (err.Error() != wantErr.Error() || reflect.TypeOf(err) != reflect.TypeOf(wantErr)) {
			t.Fatalf("decode %q %s: error %v, encoding/json's %v", raw, what, err, wantErr)
		}
		if !reflect.DeepEqual(*c, want) {
			t.Fatalf("decode %q %s:\n got %+v\nwant %+v", raw, what, *c, want)
		}
	}

	var fresh streamChunk
	check("into a fresh chunk", &fresh, fresh.decode(in))

	// tryStream decodes every chunk into the one before: once into a
	// chunk that held more, and once more into the same chunk.
	idx := 3
	used := streamChunk{ID: "chatcmpl-1", Created: 1, Model: "m", Usage: &openai.Usage{TotalTokens: 3},
		Choices: make([]streamChoice, 3, 5)}
	used.Choices[0].Delta = streamDelta{Content: "stale", ReasoningContent: "stale",
		ToolCalls: []openai.ToolCall{{Index: &idx, ID: "call", Function: openai.FunctionCall{Name: "f", Arguments: "{}"}}}}
	used.Choices[1].FinishReason = openai.FinishReasonStop
	check("into a used chunk", &used, used.decode(in))
	check("again into the same chunk", &used, used.decode(in))

	// The strings are the chunk's own: raw's memory is the next read's.
	for i := range in {
		in[i] = '#'
	}
	check("after its input was written over", &used, wantErr)
	check("after its input was written over", &fresh, wantErr)
}

// BenchmarkChunkDecode is decoding the chunks of a stream, with decode and
// with encoding/json as tryStream did before.
func BenchmarkChunkDecode(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"content", openAIContentChunk},
		{"escaped", `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"\n\n\"caf\u00e9\""},"logprobs":null,"finish_reason":null}],"usage":null}`},
		{"tool args", openAIToolCallArgs},
		{"usage", openAIUsageChunk},
		{"azure", azureContentChunk},
	} {
		raw := []byte(bc.raw)
		b.Run(bc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			var c streamChunk
			for b.Loop() {
				if err := c.decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			var c streamChunk
			for b.Loop() {
				c = streamChunk{}
				if err := json.Unmarshal(raw, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
