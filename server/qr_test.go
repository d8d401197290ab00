package server

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"testing"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
)

// DecodeQR reads the text of a QR code PNG with an independent decoder
// (gozxing), the way a phone's camera does: it finds the code in the image
// (no hint that the image is a bare code), and tries the four ways a phone
// may be held. gozxing's detector misses about one code in a hundred in one
// orientation and none of 2,000 join URLs in all four. For the external
// tests too.
func DecodeQR(t testing.TB, pngBytes []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatalf("the QR code is not a PNG: %v", err)
	}
	var errs []error
	for range 4 {
		bmp, err := gozxing.NewBinaryBitmapFromImage(img)
		if err != nil {
			t.Fatalf("binarizing the image: %v", err)
		}
		res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
		if err == nil {
			return res.GetText()
		}
		errs = append(errs, err)
		img = rotate(img)
	}
	t.Fatalf("reading the QR code: %v", errs)
	return ""
}

// rotate turns img a quarter turn clockwise.
func rotate(img image.Image) image.Image {
	b := img.Bounds()
	out := image.NewGray(image.Rect(0, 0, b.Dy(), b.Dx()))
	for y := range b.Dy() {
		for x := range b.Dx() {
			out.Set(b.Dy()-1-y, x, img.At(b.Min.X+x, b.Min.Y+y))
		}
	}
	return out
}

func TestQRPNGRoundTrip(t *testing.T) {
	texts := []string{
		"https://lab.example.org/some/prefix/j/999999",
		"http://[fe80::1]:8080/j/000000",
	}
	// Join URLs as the lab makes them, with many ports and codes.
	for i := range 300 {
		texts = append(texts, fmt.Sprintf("http://192.168.%d.%d:%d/j/%06d", i%7, i%250+1, 8000+i*37, (i*7919)%1_000_000))
	}
	for _, text := range texts {
		b, err := qrPNG(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := DecodeQR(t, b); got != text {
			t.Errorf("decoded %q, want %q", got, text)
		}
	}
}
