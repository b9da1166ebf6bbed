package a2a

import "encoding/json"

// The push notification methods of A2A.
const (
	methodCreatePushConfig = "CreateTaskPushNotificationConfig"
	methodGetPushConfig    = "GetTaskPushNotificationConfig"
	methodListPushConfigs  = "ListTaskPushNotificationConfigs"
	methodDeletePushConfig = "DeleteTaskPushNotificationConfig"
)

// pushConfig answers the push notification methods: not served (the card
// says so).
func (c *call) pushConfig(method string, _ json.RawMessage) {
	c.fail(&rpcError{Code: codePushNotSupported, Message: method + ": push notifications are not served", outcome: pushNotSupportedOutcome})
}
