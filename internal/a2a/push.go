package a2a

import (
	"context"
	"encoding/json"

	"github.com/agentd/agentd/internal/chat"
)

// Push notifications are the chat's webhook: a task's push config is set
// with the message that creates its chat (configuration's
// taskPushNotificationConfig), becomes the chat's webhook, and then
// receives the chat's run.started, input.requested and terminal events as
// agentd's webhooks do (signed Standard Webhooks, delivered at least once
// from the durable outbox by any replica). A chat's webhook is part of its
// spec and never changes, so a config is set only at creation: asking for
// the one it has answers it, another is refused, and none is deleted.

// The push notification methods of A2A.
const (
	methodCreatePushConfig = "CreateTaskPushNotificationConfig"
	methodGetPushConfig    = "GetTaskPushNotificationConfig"
	methodListPushConfigs  = "ListTaskPushNotificationConfigs"
	methodDeletePushConfig = "DeleteTaskPushNotificationConfig"
)

// pushConfigID is the id of a task's one push config, its chat's webhook.
const pushConfigID = "webhook"

// webhookOf is the URL of a chat's webhook, or "".
func webhookOf(c *chat.Chat) string {
	var sp struct {
		Webhook *struct {
			URL string `json:"url"`
		} `json:"webhook"`
	}
	if err := json.Unmarshal(c.Spec, &sp); err != nil || sp.Webhook == nil {
		return ""
	}
	return sp.Webhook.URL
}

// checkPushURL refuses a push config for a chat whose webhook is another.
func checkPushURL(c *chat.Chat, url string) *rpcError {
	if have := webhookOf(c); have != url {
		if have == "" {
			return unsupported("the task's chat was created without push notifications; a chat's webhook is set by the message that creates it")
		}
		return unsupported("the task's chat posts its notifications to another URL; a chat's webhook is set by the message that creates it")
	}
	return nil
}

// pushConfig serves the push notification config methods.
func (c *call) pushConfig(method string, raw json.RawMessage) {
	var p struct {
		TaskPushNotificationConfig
		// The get/delete/list requests name their config by id, taskId.
		PageSize  int    `json:"pageSize"`
		PageToken string `json:"pageToken"`
	}
	if e := decodeParams(raw, &p); e != nil {
		c.fail(e)
		return
	}
	ctx := c.r.Context()
	t, err := c.task(ctx, p.TaskID)
	if err != nil {
		c.failErr(err, p.TaskID)
		return
	}
	have := webhookOf(t.chat)
	cfg := TaskPushNotificationConfig{ID: pushConfigID, TaskID: TaskID(t.chat.ID, t.run), URL: have}
	switch method {
	case methodCreatePushConfig:
		if p.URL == "" {
			c.fail(invalidParams("url is required"))
			return
		}
		if e := checkPushURL(t.chat, p.URL); e != nil {
			c.fail(e)
			return
		}
		c.ok(cfg)
	case methodGetPushConfig:
		if have == "" || (p.ID != "" && p.ID != pushConfigID) {
			c.fail(invalidParams("task %q has no push config %q", p.TaskID, p.ID))
			return
		}
		c.ok(cfg)
	case methodListPushConfigs:
		list := struct {
			Configs []TaskPushNotificationConfig `json:"configs"`
		}{Configs: []TaskPushNotificationConfig{}}
		if have != "" {
			list.Configs = append(list.Configs, cfg)
		}
		c.ok(list)
	default: // delete
		c.fail(unsupported("a chat's webhook cannot be removed: it is part of the chat's spec"))
	}
}

// pushBody adds the push config of a new task to its chat's create body.
func pushBody(body map[string]any, cfg *TaskPushNotificationConfig) *rpcError {
	if cfg == nil {
		return nil
	}
	if cfg.URL == "" {
		return invalidParams("configuration.taskPushNotificationConfig.url is required")
	}
	body["webhook"] = map[string]string{"url": cfg.URL}
	return nil
}

// checkPushOf checks the push config of a message to an existing chat.
func (c *call) checkPushOf(ctx context.Context, chatID string, cfg *TaskPushNotificationConfig) error {
	if cfg == nil {
		return nil
	}
	ch, err := c.h.chats.Get(ctx, c.tenant, chatID)
	if err != nil {
		return err
	}
	if e := checkPushURL(ch, cfg.URL); e != nil {
		return e
	}
	return nil
}
