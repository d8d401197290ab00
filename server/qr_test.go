package server

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
)

// decodeQR reads the text of a QR code PNG with an independent decoder.
func decodeQR(t testing.TB, pngBytes []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(pngBytes))
	if err != nil {
		t.Fatalf("decoding the PNG: %v", err)
	}
	return decodeQRImage(t, img)
}

func decodeQRImage(t testing.TB, img image.Image) string {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatalf("binarizing the image: %v", err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("reading the QR code: %v", err)
	}
	return res.GetText()
}

func TestQRPNGRoundTrip(t *testing.T) {
	for _, text := range []string{
		"http://192.168.1.20:8080/j/042137",
		"https://lab.example.org/some/prefix/j/999999",
		"http://[fe80::1]:8080/j/000000",
	} {
		b, err := qrPNG(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeQR(t, b); got != text {
			t.Errorf("decoded %q, want %q", got, text)
		}
	}
}
