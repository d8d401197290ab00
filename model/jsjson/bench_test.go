package jsjson

import (
	"strings"
	"testing"
)

const benchReply = `{"runId":"run-1","callId":"lookup","kind":"completed","output":"The answer is 42."}`

func BenchmarkParseReply(b *testing.B) {
	data := []byte(benchReply)
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("string", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchReply)))
		for b.Loop() {
			if _, err := Parse(benchReply); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseFrame parses a frame carrying a 64 KiB string member: plain
// text, and text with a newline escape every line and a few escaped quotes.
func BenchmarkParseFrame(b *testing.B) {
	line := strings.Repeat("lorem ipsum dolor sit amet ", 3)[:79]
	plain := strings.Repeat(line+" ", 64<<10/80)
	escaped := strings.Repeat(`say \"`+line[:67]+`\" \n`, 64<<10/80)
	for _, c := range []struct{ name, body string }{{"plain", plain}, {"escaped", escaped}} {
		data := []byte(`{"type":"queueReply","raw":"` + c.body + `","message":7}`)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseNested measures skipping nested values, which keeps nothing.
func BenchmarkParseNested(b *testing.B) {
	item := `{"id":12345,"name":"item name","tags":["a","b","c"],"ok":true,"score":-1.5e3,"child":{"x":null}}`
	data := []byte(`{"runId":"run-1","items":[` + strings.Repeat(item+",", 500) + item + `]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("Answer for run-1: \"x\" é\n", 40)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
