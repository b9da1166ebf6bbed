package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // GIF images in messages
	_ "image/jpeg" // JPEG images in messages
	_ "image/png"  // PNG images in messages
	"strconv"
	"strings"

	_ "golang.org/x/image/webp" // WebP images in messages (read only: sent as PNG)
)

// TypeMultiModalMessage is AgentChat's MultiModalMessage: text and images.
const TypeMultiModalMessage = "MultiModalMessage"

// Part is one item of a MultiModalMessage's content: a text, or an image.
// In JSON a text is a string and an image an object: {"image": {"data":
// "<base64>", "media_type"?}} (agentd's form, which it writes), or
// {"data": "<base64>"} (what AgentChat's Image dumps to, read as is).
type Part struct {
	Text  string
	Image *ImagePart
}

// ImagePart is an image as a client gave it: its bytes and their media
// type (image/png, image/jpeg, image/gif or image/webp, from the bytes
// themselves).
type ImagePart struct {
	Data      []byte `json:"data"`
	MediaType string `json:"media_type,omitempty"`
	// bare: given in AgentChat's form ({"data"}), which problems point into.
	bare bool
}

// MarshalJSON writes a text as a string and an image as {"image": {...}}.
func (p Part) MarshalJSON() ([]byte, error) {
	if p.Image == nil {
		return json.Marshal(p.Text)
	}
	return json.Marshal(struct {
		Image *ImagePart `json:"image"`
	}{p.Image})
}

// UnmarshalJSON reads a string, {"image": {"data", "media_type"?}} or
// AgentChat's {"data"}. The image is not checked here: CheckParts does.
func (p *Part) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*p = Part{}
		return json.Unmarshal(b, &p.Text)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return errors.New(`must be a text or an image ({"image": {"data": "<base64>"}})`)
	}
	img := new(ImagePart)
	if raw, ok := fields["image"]; ok {
		if len(fields) != 1 {
			return errors.New(`an image part holds only "image"`)
		}
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(raw, &inner); err != nil || inner == nil {
			return errors.New(`"image" must be an object {"data": "<base64>", "media_type"?}`)
		}
		for k := range inner {
			if k != "data" && k != "media_type" {
				return fmt.Errorf("%q is not a field of an image: use data, media_type", k)
			}
		}
		if err := json.Unmarshal(raw, img); err != nil {
			return errors.New(`"image" must be {"data": "<base64>", "media_type"?: string}`)
		}
	} else {
		if _, ok := fields["data"]; !ok || len(fields) != 1 {
			return errors.New(`must be a text or an image ({"image": {"data": "<base64>"}})`)
		}
		if err := json.Unmarshal(b, img); err != nil {
			return errors.New(`"data" must be base64 text`)
		}
		img.bare = true
	}
	*p = Part{Image: img}
	return nil
}

// Image limits that no server setting bounds.
const (
	// DefaultMaxImageBytes is the default of AGENTD_MAX_IMAGE_BYTES.
	DefaultMaxImageBytes = 5 << 20
	// MaxImagesPerMessage bounds the images of one message.
	MaxImagesPerMessage = 16
	// maxImagePixels bounds an image's width times height, so that no
	// small file that decodes to a huge bitmap reaches a model client.
	maxImagePixels = 64 << 20
)

// ImageConfig reads an image's format and size from its header, and says
// why it cannot be sent: a format other than PNG, JPEG, GIF or WebP, or too
// many pixels.
func ImageConfig(data []byte) (mediaType string, cfg image.Config, err error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", cfg, errors.New("is not an image agentd can read (PNG, JPEG, GIF or WebP)")
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width*cfg.Height > maxImagePixels {
		return "", cfg, fmt.Errorf("is %dx%d pixels: at most %d pixels in all", cfg.Width, cfg.Height, maxImagePixels)
	}
	return "image/" + format, cfg, nil
}

// CheckParts checks a MultiModalMessage's content at path: at least one
// part, at most MaxImagesPerMessage images of at most maxImageBytes each,
// each a decodable image whose media_type (if given) is its own, text of
// at most maxTextBytes in all, no NUL. It fills in each image's media
// type.
func CheckParts(path string, parts []Part, maxImageBytes, maxTextBytes int, add func(path, format string, args ...any)) {
	if maxImageBytes <= 0 {
		maxImageBytes = DefaultMaxImageBytes
	}
	if len(parts) == 0 {
		add(path, "a MultiModalMessage holds at least one text or image")
		return
	}
	images, text := 0, 0
	for i, p := range parts {
		pp := path + "/" + strconv.Itoa(i)
		if p.Image == nil {
			text += len(p.Text)
			if strings.IndexByte(p.Text, 0) >= 0 {
				add(pp, "must not contain the NUL character (\\u0000), which the store cannot hold")
			}
			continue
		}
		images++
		if images == MaxImagesPerMessage+1 {
			add(path, "holds at most %d images", MaxImagesPerMessage)
		}
		ip := pp + "/image/data"
		if p.Image.bare {
			ip = pp + "/data"
		}
		switch {
		case len(p.Image.Data) == 0:
			add(ip, "is required: the image's bytes in base64")
			continue
		case len(p.Image.Data) > maxImageBytes:
			add(ip, "is %d bytes: an image may have at most %d (AGENTD_MAX_IMAGE_BYTES)", len(p.Image.Data), maxImageBytes)
			continue
		}
		mt, _, err := ImageConfig(p.Image.Data)
		if err != nil {
			add(ip, "%s", err.Error())
			continue
		}
		if p.Image.MediaType != "" && p.Image.MediaType != mt {
			add(pp+"/image/media_type", "is %q, but the data is %s", p.Image.MediaType, mt)
			continue
		}
		p.Image.MediaType = mt
	}
	if text > maxTextBytes {
		add(path, "its text must be at most %d bytes", maxTextBytes)
	}
}

// PartsText is AgentChat's MultiModalMessage.to_text: the texts and an
// "<image>" for each image, one per line. It is what a text-only reader of
// the message (the console's list, termination conditions) sees.
func PartsText(parts []Part) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		if p.Image != nil {
			s[i] = "<image>"
		} else {
			s[i] = p.Text
		}
	}
	return strings.Join(s, "\n")
}

// MessageContent is a history message's content: a text, or (of a
// MultiModalMessage) a list of texts and images.
type MessageContent struct {
	Text  string
	Parts []Part
}

// MarshalJSON writes the text, or the list of parts.
func (c MessageContent) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON reads a string or a list of parts.
func (c *MessageContent) UnmarshalJSON(b []byte) error {
	*c = MessageContent{}
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		c.Parts = []Part{}
		return json.Unmarshal(b, &c.Parts)
	}
	return json.Unmarshal(b, &c.Text)
}

// String is the content's text: of a list of parts, AgentChat's to_text.
func (c MessageContent) String() string {
	if c.Parts != nil {
		return PartsText(c.Parts)
	}
	return c.Text
}
