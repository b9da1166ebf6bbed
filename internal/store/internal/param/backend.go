package param

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/agentd/agentd/internal/chat"
)

// The parameters of chat.AppStore, checked and normalized the same way for
// both stores.

// CheckDeliveries validates the webhook deliveries of events: each names an
// event of the append by seq and type, has a URL and a known source, and no
// two name the same event and URL.
func CheckDeliveries(ds []chat.Delivery, events []chat.Event) error {
	if len(events) == 0 {
		return fmt.Errorf("%w: deliveries without events", ErrInvalid)
	}
	first := events[0].Seq
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		i := d.Seq - first
		switch {
		case i < 0 || i >= int64(len(events)):
			return fmt.Errorf("%w: delivery of seq %d, which is not an event of the append", ErrInvalid, d.Seq)
		case events[i].Type != d.Event:
			return fmt.Errorf("%w: delivery of seq %d names event %q, the event is %q", ErrInvalid, d.Seq, d.Event, events[i].Type)
		case d.URL == "":
			return fmt.Errorf("%w: delivery of seq %d has no URL", ErrInvalid, d.Seq)
		case d.Source != chat.DeliverySpec && d.Source != chat.DeliveryTenant:
			return fmt.Errorf("%w: delivery of seq %d has source %q", ErrInvalid, d.Seq, d.Source)
		}
		key := strconv.FormatInt(d.Seq, 10) + " " + d.URL
		if seen[key] {
			return fmt.Errorf("%w: two deliveries of seq %d to one URL", ErrInvalid, d.Seq)
		}
		seen[key] = true
	}
	return nil
}

// MergeMetadata merges patch into the metadata object cur (nil, empty or
// the JSON null mean none): a null value removes its key, any other value
// sets it. The result is compact JSON with sorted keys, or nil when no key
// is left. It is chat.ErrMetadataTooLarge when longer than max bytes.
func MergeMetadata(cur json.RawMessage, patch map[string]json.RawMessage, max int) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if b := bytes.TrimSpace(cur); len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("stored metadata is not an object: %w", err)
		}
	}
	for k, v := range patch {
		if b := bytes.TrimSpace(v); len(b) == 0 || string(b) == "null" {
			delete(m, k)
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return nil, fmt.Errorf("%w: metadata %q is not JSON", ErrInvalid, k)
		}
		m[k] = compact.Bytes()
	}
	if len(m) == 0 {
		return nil, nil
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if max > 0 && len(out) > max {
		return nil, fmt.Errorf("merged metadata is %d bytes, over the limit of %d: %w", len(out), max, chat.ErrMetadataTooLarge)
	}
	return out, nil
}

// MetadataValues returns the JSON values a metadata filter matches: the
// string value, and the value itself when it is the JSON text of a number,
// true, false or null.
func MetadataValues(v string) []json.RawMessage {
	s, _ := json.Marshal(v)
	out := []json.RawMessage{s}
	var x any
	if err := json.Unmarshal([]byte(v), &x); err == nil {
		switch x.(type) {
		case float64, bool, nil:
			// Compact form only: "3" but not " 3".
			if bytes.Equal(bytes.TrimSpace([]byte(v)), []byte(v)) && v != "" {
				out = append(out, json.RawMessage(v))
			}
		}
	}
	return out
}

// EncodeNameCursor returns the opaque cursor that continues after name
// (team lists are ordered by name).
func EncodeNameCursor(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name))
}

// DecodeNameCursor parses a cursor from EncodeNameCursor.
func DecodeNameCursor(s string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) == 0 {
		return "", fmt.Errorf("cursor %q: %w", s, chat.ErrInvalidCursor)
	}
	return string(raw), nil
}

// Page sizes of teams and deliveries.
const (
	DefaultListTeams      = 50
	MaxListTeams          = 1000
	DefaultListDeliveries = 100
	MaxListDeliveries     = 1000
)
