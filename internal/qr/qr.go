// Package qr draws QR codes as PNG images.
package qr

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"

	qrcode "github.com/yeqown/go-qrcode/v2"
)

// qrModulePixels is the side of one QR module in the PNG: a version-3 code
// (a join URL of about 40 characters) becomes 29 modules plus the quiet
// zone, about 300 px, sharp on a projector and on paper.
const qrModulePixels = 8

// qrQuiet is the white margin, in modules, that readers need around a code.
const qrQuiet = 4

// PNG encodes text as a black-on-white QR code in PNG. The library builds
// the matrix; the image is drawn here with the standard library, so no
// drawing library comes along.
func PNG(text string) ([]byte, error) {
	code, err := qrcode.NewWith(text, qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionMedium))
	if err != nil {
		return nil, fmt.Errorf("encoding %q as a QR code: %w", text, err)
	}
	var bits [][]bool
	if err := code.Save(matrixWriter{&bits}); err != nil {
		return nil, fmt.Errorf("encoding %q as a QR code: %w", text, err)
	}
	n := len(bits) + 2*qrQuiet
	img := image.NewPaletted(image.Rect(0, 0, n*qrModulePixels, n*qrModulePixels), color.Palette{color.White, color.Black})
	for y, row := range bits {
		for x, dark := range row {
			if !dark {
				continue
			}
			for dy := range qrModulePixels {
				for dx := range qrModulePixels {
					img.SetColorIndex((x+qrQuiet)*qrModulePixels+dx, (y+qrQuiet)*qrModulePixels+dy, 1)
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("writing a QR code as PNG: %w", err)
	}
	return buf.Bytes(), nil
}

// matrixWriter keeps the code's modules, dark as true.
type matrixWriter struct{ bits *[][]bool }

func (w matrixWriter) Write(m qrcode.Matrix) error {
	*w.bits = m.Bitmap()
	return nil
}

func (matrixWriter) Close() error { return nil }
