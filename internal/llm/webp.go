package llm

import "image"

// A lossy WebP holds its pixels as Y'CbCr with chroma at half the
// resolution both ways (VP8). Go's decoder hands them over as they are,
// and image.YCbCr's colours are JPEG's conversion of the nearest chroma
// sample, while libwebp (which PIL, and so AgentChat, decodes with)
// interpolates the chroma between samples ("fancy upsampling") and
// converts with BT.601's studio range. On a small image with sharp colour
// edges the two differ by tens of levels; webpRGB converts as libwebp
// does, so that a model is sent AgentChat's pixels.

// webpRGB converts a lossy WebP's planes to opaque RGB as libwebp's
// default decoding does; ok is false for an image of another layout.
func webpRGB(src image.Image) (*image.NRGBA, bool) {
	var ycc *image.YCbCr
	switch m := src.(type) {
	case *image.YCbCr:
		ycc = m
	case *image.NYCbCrA:
		ycc = &m.YCbCr // the alpha is dropped: AgentChat sends RGB
	default:
		return nil, false
	}
	if ycc.SubsampleRatio != image.YCbCrSubsampleRatio420 {
		return nil, false
	}
	r := ycc.Rect
	w, h := r.Dx(), r.Dy()
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	lumaRow := func(y int) []uint8 { o := ycc.YOffset(r.Min.X, r.Min.Y+y); return ycc.Y[o : o+w] }
	cw := (w + 1) / 2
	chromaRow := func(y int) (cb, cr []uint8) {
		o := ycc.COffset(r.Min.X, r.Min.Y+2*y)
		return ycc.Cb[o : o+cw], ycc.Cr[o : o+cw]
	}
	out := func(y int) []uint8 { return dst.Pix[y*dst.Stride : y*dst.Stride+4*w] }
	// The first row takes chroma row 0 alone; each later pair of rows
	// (2k-1, 2k) lies between chroma rows k-1 and k; an even height's last
	// row takes the last chroma row alone.
	cb0, cr0 := chromaRow(0)
	upsampleRows(lumaRow(0), nil, cb0, cr0, cb0, cr0, out(0), nil, w)
	for k := 1; 2*k < h; k++ {
		tcb, tcr := chromaRow(k - 1)
		ccb, ccr := chromaRow(k)
		upsampleRows(lumaRow(2*k-1), lumaRow(2*k), tcb, tcr, ccb, ccr, out(2*k-1), out(2*k), w)
	}
	if h%2 == 0 && h > 1 {
		lcb, lcr := chromaRow(h/2 - 1)
		upsampleRows(lumaRow(h-1), nil, lcb, lcr, lcb, lcr, out(h-1), nil, w)
	}
	return dst, true
}

// upsampleRows writes two rows of pixels (bottom may be nil) from their
// luma and the chroma rows above (tu, tv) and below (cu, cv) them: each
// pixel's chroma is a 9-3-3-1 weighting of its four nearest samples.
func upsampleRows(top, bottom, tu, tv, cu, cv []uint8, topDst, bottomDst []uint8, n int) {
	put := func(dst []uint8, x int, y, u, v int) {
		dst[4*x+0] = clip8(mulHi(y, 19077) + mulHi(v, 26149) - 14234)
		dst[4*x+1] = clip8(mulHi(y, 19077) - mulHi(u, 6419) - mulHi(v, 13320) + 8708)
		dst[4*x+2] = clip8(mulHi(y, 19077) + mulHi(u, 33050) - 17685)
		dst[4*x+3] = 255
	}
	// Chroma pairs are carried as u | v<<16, added and shifted together,
	// as the exact rounding needs.
	load := func(u, v []uint8, i int) uint32 { return uint32(u[i]) | uint32(v[i])<<16 }
	emit := func(dst []uint8, x int, y uint8, uv uint32) { put(dst, x, int(y), int(uv&0xff), int(uv>>16)) }
	tl, l := load(tu, tv, 0), load(cu, cv, 0)
	emit(topDst, 0, top[0], (3*tl+l+0x00020002)>>2)
	if bottom != nil {
		emit(bottomDst, 0, bottom[0], (3*l+tl+0x00020002)>>2)
	}
	for x := 1; x <= (n-1)>>1; x++ {
		t, c := load(tu, tv, x), load(cu, cv, x)
		avg := tl + t + l + c + 0x00080008
		d12 := (avg + 2*(t+l)) >> 3
		d03 := (avg + 2*(tl+c)) >> 3
		emit(topDst, 2*x-1, top[2*x-1], (d12+tl)>>1)
		emit(topDst, 2*x, top[2*x], (d03+t)>>1)
		if bottom != nil {
			emit(bottomDst, 2*x-1, bottom[2*x-1], (d03+l)>>1)
			emit(bottomDst, 2*x, bottom[2*x], (d12+c)>>1)
		}
		tl, l = t, c
	}
	if n%2 == 0 {
		emit(topDst, n-1, top[n-1], (3*tl+l+0x00020002)>>2)
		if bottom != nil {
			emit(bottomDst, n-1, bottom[n-1], (3*l+tl+0x00020002)>>2)
		}
	}
}

func mulHi(v, coeff int) int { return (v * coeff) >> 8 }

// clip8 takes a value with 6 fractional bits to 0..255.
func clip8(v int) uint8 {
	switch {
	case v&^(256<<6-1) == 0:
		return uint8(v >> 6)
	case v < 0:
		return 0
	}
	return 255
}
