package qr_test

import (
	"fmt"
	"testing"

	"github.com/toolcall-lab/lab/internal/qr"
	"github.com/toolcall-lab/lab/internal/qr/qrtest"
)

func TestPNGRoundTrip(t *testing.T) {
	texts := []string{
		"https://lab.example.org/some/prefix/j/999999",
		"http://[fe80::1]:8080/j/000000",
	}
	// Join URLs as the lab makes them, with many ports and codes.
	for i := range 300 {
		texts = append(texts, fmt.Sprintf("http://192.168.%d.%d:%d/j/%06d", i%7, i%250+1, 8000+i*37, (i*7919)%1_000_000))
	}
	for _, text := range texts {
		b, err := qr.PNG(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := qrtest.Decode(t, b); got != text {
			t.Errorf("decoded %q, want %q", got, text)
		}
	}
}
