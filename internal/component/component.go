// Package component translates AutoGen AgentChat team components — the JSON
// that `team.dump_component()` writes and AutoGen Studio saves — into chat
// specs, and chat specs back into team components.
//
// It is a pure mapping: it never imports, evaluates or runs anything named in
// a file. AgentChat's own loader imports the Python module a component's
// provider names and runs FunctionTool source; here a provider is only a
// string looked up in a fixed table. FunctionTool source and
// PythonCodeExecutionTool code become tools that run in the chat's sandbox,
// never on the server; every other component that would run code from the
// file on the server (selector or candidate functions, local code
// executors) is refused with a problem that names its JSON path and
// provider and says what to use instead.
package component

import (
	"encoding/json"
	"strings"
)

// Component is AgentChat's ComponentModel: what dump_component() emits for a
// team, an agent, a model client, a termination condition and so on.
type Component struct {
	Provider         string          `json:"provider"`
	ComponentType    string          `json:"component_type,omitempty"`
	Version          *int            `json:"version,omitempty"`
	ComponentVersion *int            `json:"component_version,omitempty"`
	Description      string          `json:"description,omitempty"`
	Label            string          `json:"label,omitempty"`
	Config           json.RawMessage `json:"config"`
}

// Warning is something of a component file that agentd accepted but does not
// use as AgentChat would (an API key, a base URL, an option it ignores). It is
// returned with the created chat so that nothing is dropped silently.
type Warning struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Providers agentd translates. The strings are AgentChat 0.7.5's
// component_provider_override values, which is what dump_component() writes.
const (
	provRoundRobin = "autogen_agentchat.teams.RoundRobinGroupChat"
	provSelector   = "autogen_agentchat.teams.SelectorGroupChat"
	provSwarm      = "autogen_agentchat.teams.Swarm"

	provAssistant    = "autogen_agentchat.agents.AssistantAgent"
	provUserProxy    = "autogen_agentchat.agents.UserProxyAgent"
	provCodeExecutor = "autogen_agentchat.agents.CodeExecutorAgent"

	provOpenAI    = "autogen_ext.models.openai.OpenAIChatCompletionClient"
	provAzure     = "autogen_ext.models.openai.AzureOpenAIChatCompletionClient"
	provAnthropic = "autogen_ext.models.anthropic.AnthropicChatCompletionClient"
	provOllama    = "autogen_ext.models.ollama.OllamaChatCompletionClient"
	provReplay    = "autogen_ext.models.replay.ReplayChatCompletionClient"

	provBuffered     = "autogen_core.model_context.BufferedChatCompletionContext"
	provUnbounded    = "autogen_core.model_context.UnboundedChatCompletionContext"
	provHeadAndTail  = "autogen_core.model_context.HeadAndTailChatCompletionContext"
	provTokenLimited = "autogen_core.model_context.TokenLimitedChatCompletionContext"

	provStaticWorkbench       = "autogen_core.tools.StaticWorkbench"
	provStaticStreamWorkbench = "autogen_core.tools.StaticStreamWorkbench"
	provMcpWorkbench          = "autogen_ext.tools.mcp.McpWorkbench"
	provMcpHTTPAdapter        = "autogen_ext.tools.mcp.StreamableHttpMcpToolAdapter"
	provMcpSseAdapter         = "autogen_ext.tools.mcp.SseMcpToolAdapter"

	provDockerExecutor = "autogen_ext.code_executors.docker.DockerCommandLineCodeExecutor"

	provStructured = "autogen_agentchat.messages.StructuredMessageFactory"

	provOr          = "autogen_agentchat.base.OrTerminationCondition"
	provAnd         = "autogen_agentchat.base.AndTerminationCondition"
	provMaxMessage  = "autogen_agentchat.conditions.MaxMessageTermination"
	provTextMention = "autogen_agentchat.conditions.TextMentionTermination"
	provTokenUsage  = "autogen_agentchat.conditions.TokenUsageTermination"
	provHandoff     = "autogen_agentchat.conditions.HandoffTermination"
	provTimeout     = "autogen_agentchat.conditions.TimeoutTermination"
	provSourceMatch = "autogen_agentchat.conditions.SourceMatchTermination"
	provFunction    = "autogen_agentchat.conditions.FunctionCallTermination"
	provStopMessage = "autogen_agentchat.conditions.StopMessageTermination"
	provExternal    = "autogen_agentchat.conditions.ExternalTermination"
	provTextMessage = "autogen_agentchat.conditions.TextMessageTermination"
)

// wellKnown are the short provider names AgentChat's loader accepts besides
// the full ones (autogen_core WELL_KNOWN_PROVIDERS).
var wellKnown = map[string]string{
	"azure_openai_chat_completion_client": provAzure,
	"AzureOpenAIChatCompletionClient":     provAzure,
	"openai_chat_completion_client":       provOpenAI,
	"OpenAIChatCompletionClient":          provOpenAI,
	"anthropic_chat_completion_client":    provAnthropic,
	"AnthropicChatCompletionClient":       provAnthropic,
	"ollama_chat_completion_client":       provOllama,
	"OllamaChatCompletionClient":          provOllama,
}

// Endpoints are the server's model endpoints, as translating model clients
// needs them: a file's client is mapped onto the endpoint that serves it,
// and an export names the endpoint's resource where AgentChat's client needs
// it. Keys never pass through here.
type Endpoints interface {
	// Match names the endpoint that serves a file's model client, or says
	// why none does (listing the configured endpoints).
	Match(c ModelClient) (endpoint string, err error)
	// Describe tells what may be exported of an endpoint.
	Describe(endpoint string) (EndpointInfo, bool)
}

// ModelClient is what a file's model client says about where it calls.
type ModelClient struct {
	// Kind is the endpoint kind the client speaks: openai, azure or
	// anthropic.
	Kind  string
	Model string
	// BaseURL is the client's base_url, or azure_endpoint for Azure.
	BaseURL string
	// Deployment is an Azure client's azure_deployment.
	Deployment string
}

// EndpointInfo describes an endpoint without its key.
type EndpointInfo struct {
	Kind, BaseURL, APIVersion, Deployment string
}

// refused are providers that exist in AgentChat 0.7.5 but that agentd will
// not run, with the reason and what to use instead. Those that would run
// code from the file, or code on the server's host, come first.
var refused = map[string]string{
	"autogen_ext.code_executors.local.LocalCommandLineCodeExecutor": "it runs code directly on the server's host; agentd runs code only in its sandbox. " +
		"Use DockerCommandLineCodeExecutor, which agentd maps onto its sandbox",
	"autogen_ext.code_executors.jupyter.JupyterCodeExecutor": "it runs a Jupyter kernel on the server's host; agentd runs code only in its sandbox. " +
		"Use DockerCommandLineCodeExecutor, which agentd maps onto its sandbox",
	"autogen_ext.tools.mcp.StdioMcpToolAdapter": "a stdio MCP server is a command started on the server's host. " +
		"Run the MCP server yourself and use McpWorkbench with StreamableHttpServerParams or SseServerParams",
	"autogen_ext.code_executors.docker_jupyter.DockerJupyterCodeExecutor": "agentd has no Jupyter kernels. " +
		"Use DockerCommandLineCodeExecutor, which agentd maps onto its sandbox",
	"autogen_ext.code_executors.azure.ACADynamicSessionsCodeExecutor": "agentd does not call Azure Container Apps sessions. " +
		"Use DockerCommandLineCodeExecutor, which agentd maps onto its sandbox",
	"autogen_agentchat.tools.AgentTool": "agents as tools are not supported. Make the agent a participant of the team",
	"autogen_agentchat.tools.TeamTool":  "teams as tools are not supported. Make the agents participants of the team",
}

// canonical maps a provider to the name used in the tables above.
func canonical(p string) string {
	if full, ok := wellKnown[p]; ok {
		return full
	}
	return p
}

// shortName is the class name of a provider, for messages.
func shortName(p string) string {
	return p[strings.LastIndexByte(p, '.')+1:]
}
