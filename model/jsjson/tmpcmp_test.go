package jsjson

import (
	"encoding/json"
	"testing"
)

func BenchmarkTmpStdlibReply(b *testing.B) {
	data := []byte(benchReply)
	b.ReportAllocs()
	for b.Loop() {
		var m map[string]json.RawMessage
		json.Unmarshal(data, &m)
		var s string
		json.Unmarshal(m["runId"], &s)
	}
}
