package chat

import "encoding/json"

// A chat's metadata: the client's own keys, searched and changed.

// MetadataMatch is one metadata.KEY=VALUE filter of a chat list: the chat's
// metadata has Key, and its value is the string Value, or a number, true,
// false or null whose JSON text is Value.
type MetadataMatch struct {
	Key   string
	Value string
}

// PatchMetadataParams are the arguments of Store.PatchMetadata.
type PatchMetadataParams struct {
	Tenant string
	ChatID string
	// Patch is merged into the metadata: a key with the JSON null removes
	// that key, any other value sets it.
	Patch map[string]json.RawMessage
	// MaxBytes bounds the merged metadata's JSON.
	MaxBytes int
}
