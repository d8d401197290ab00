package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
)

// frameWriteBuffer is the write buffer of an upgraded connection. net/http
// hands a hijacked connection a 4 KiB one, and a state frame past that
// (a session with a few held replies) then leaves in two writes: two
// segments and two wake-ups of the reader instead of one. 8 KiB holds a
// typical class's state for 4 KiB more per connection.
const frameWriteBuffer = 8 << 10

// bigWriteBuffer wraps the ResponseWriter given to websocket.Accept so that
// the hijacked connection writes through a frameWriteBuffer.
type bigWriteBuffer struct{ http.ResponseWriter }

func (w bigWriteBuffer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("flushing before the upgrade: %w", err)
	}
	brw.Writer = bufio.NewWriterSize(conn, frameWriteBuffer)
	return conn, brw, nil
}
