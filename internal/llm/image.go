package llm

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"github.com/agentd/agentd/internal/chat"
)

// imagePNG is an image of a message as AgentChat's Image sends it: as PNG
// of its pixels in RGB (Image converts every image to RGB, dropping alpha
// without blending, and writes it as PNG whatever it was given as). A PNG
// that already is 8-bit RGB without transparency goes as it is: its pixels
// are those PIL would write. Anything else is decoded and written again;
// the bytes then differ from PIL's (another compressor), the pixels do not.
func imagePNG(img *chat.Image) ([]byte, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil {
		return nil, fmt.Errorf("read image: %w", err)
	}
	if format == "png" && cfg.ColorModel == color.RGBAModel {
		return img.Data, nil
	}
	src, _, err := image.Decode(bytes.NewReader(img.Data))
	if err != nil {
		return nil, fmt.Errorf("decode %s image: %w", format, err)
	}
	dst, converted := (*image.NRGBA)(nil), false
	if format == "webp" {
		dst, converted = webpRGB(src) // a lossy WebP's colours as libwebp makes them
	}
	if !converted {
		dst = rgbOf(src)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, dst); err != nil {
		return nil, fmt.Errorf("encode image as PNG: %w", err)
	}
	return b.Bytes(), nil
}

// rgbOf is src's pixels in opaque RGB: the colour kept, the alpha dropped
// (not blended), as PIL's convert("RGB") does.
func rgbOf(src image.Image) *image.NRGBA {
	r := src.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, r.Dx(), r.Dy()))
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.NRGBAModel.Convert(src.At(x, y)).(color.NRGBA)
			c.A = 255 // RGB keeps the colour and drops the alpha
			dst.SetNRGBA(x-r.Min.X, y-r.Min.Y, c)
		}
	}
	return dst
}

// imageDataURL is the data: URL AgentChat's Image.data_uri makes of img.
func imageDataURL(img *chat.Image) (string, error) {
	data, err := imagePNG(img)
	if err != nil {
		return "", err
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(data), nil
}
